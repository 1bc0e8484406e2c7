import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

/// The CPU backend's run-time vector level (CPUVectorLevel, the C target CUpdraftKernels): every level
/// this CPU runs matches the Double reference and gives bit-identical results to the Swift
/// expressions the C loops replaced; a level the CPU lacks or an unknown name falls back to the best
/// level with one warning, in process and through UPDRAFT_CPU_LEVEL in the `updraft` executable.
final class CPUVectorLevelTests: XCTestCase {
    /// The levels this CPU runs, lowest first (baseline always).
    private var runnable: [CPUVectorLevel] { CPUVectorLevel.allCases.filter { $0.rawValue <= CPUVectorLevel.supported.rawValue } }

    /// Runs `body` at each level this CPU runs, then puts the start-up level back.
    private func atEachLevel(_ body: (CPUVectorLevel) throws -> Void) rethrows {
        let start = CPUVectorLevel.active
        defer { CPUVectorLevel.force(start) }
        for level in runnable {
            XCTAssertEqual(CPUVectorLevel.force(level), level)
            XCTAssertEqual(CPUVectorLevel.active, level)
            try body(level)
        }
    }

    func testEveryLevelTheCPURunsMatchesTheReference() {
        atEachLevel { level in
            let rows = BackendComparison(backend: CPUBackend()).run(.quick)
            XCTAssertFalse(rows.isEmpty)
            XCTAssertTrue(rows.allSatisfy(\.ok), "\(level):\n" + ComparisonRow.table(rows.filter { !$0.ok }))
        }
    }

    /// Inputs with every awkward float: NaN (quiet), infinities, signed zeros, subnormals, large and
    /// small values; an odd count so the vector loops end in a tail.
    private func awkwardValues(_ count: Int, seed: UInt64) -> [Float] {
        var rng = SplitMix64(seed: seed)
        let special: [Float] = [.nan, .infinity, -.infinity, 0, -0.0, .leastNonzeroMagnitude, -.leastNormalMagnitude,
                                .greatestFiniteMagnitude, 1e-30, -1, 1, 2, -2, 6, 0.5]
        return (0..<count).map { i in i < special.count ? special[i] : rng.nextFloat(in: -8...8) * (i % 7 == 0 ? 1e6 : 1) }
    }

    private func assertSameBits(_ a: [Float], _ b: [Float], _ label: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(a.count, b.count, label, file: file, line: line)
        let first = a.indices.first { $0 < b.count && a[$0].bitPattern != b[$0].bitPattern }
        XCTAssertNil(first, "\(label): element \(first ?? 0): \(first.map { a[$0] } ?? 0) vs \(first.map { b[$0] } ?? 0)",
                     file: file, line: line)
    }

    /// The C activations give exactly the activation table's value per element (the definition the
    /// Swift loops ran), forward and backward, in place too.
    func testActivationsAreTheTablesExpressionsAtEveryLevel() throws {
        let count = 20_011
        let x = awkwardValues(count, seed: 1), dy = awkwardValues(count, seed: 2)
        // (kind, whether its backward is a C loop too)
        let kinds: [(Activation, Bool)] = [(.relu, true), (.leakyReLU(alpha: 0.1), true), (.linear(alpha: 0.3, beta: -0.7), false),
                                          (.clip(min: -1, max: 2), false)]
        try atEachLevel { level in
            let be = CPUBackend()
            let g = ActivationGeometry(count: count)
            for (a, backwardInC) in kinds {
                let (k, p) = (a.kind, a.scalars)
                let xb = try be.makeBuffer(x), yb = try be.makeBuffer(count: count)
                try be.activationForward(a, g, input: xb, output: yb)
                assertSameBits(try be.download(yb), x.map { k.forward($0, p) }, "\(level) \(a) forward")
                try be.activationForward(a, g, input: xb, output: xb)
                assertSameBits(try be.download(xb), x.map { k.forward($0, p) }, "\(level) \(a) forward in place")
                guard backwardInC else { continue }
                let v = a.backwardReadsOutput ? x.map { k.forward($0, p) } : x
                let vb = try be.makeBuffer(v), dyb = try be.makeBuffer(dy), dxb = try be.makeBuffer(count: count)
                try be.activationBackward(a, g, input: vb, output: vb, outputGradient: dyb, inputGradient: dxb)
                let expected = zip(v, dy).map { v, d in d * k.derivative(v, p, fromOutput: a.backwardReadsOutput) }
                assertSameBits(try be.download(dxb), expected, "\(level) \(a) backward")
            }
        }
    }

    /// SGD and Adam steps, half conversions and the 8-bit pixel upload give the same bits at every level.
    /// Depthwise and grouped convolutions sum their taps in C at the CPU's level (`upd_tap_sum`): the
    /// same bits at every level (9 taps and the general count, strided, with bias), and the reference's values.
    func testGroupedConvolutionTapSumsAgreeBitForBitAcrossLevels() throws {
        let cases: [(ConvolutionSpec, Shape)] = [
            (ConvolutionSpec(inputChannels: 16, outputChannels: 16, kernelH: 3, kernelW: 3, groups: 16,
                             padding: .valid(top: 1, bottom: 1, left: 1, right: 1)), [2, 16, 13, 21]),
            (ConvolutionSpec(inputChannels: 12, outputChannels: 12, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2, groups: 12,
                             padding: .valid(top: 1, bottom: 1, left: 1, right: 1)), [2, 12, 15, 17]),
            (ConvolutionSpec(inputChannels: 8, outputChannels: 16, kernelH: 5, kernelW: 3, groups: 4,
                             padding: .valid(top: 2, bottom: 2, left: 1, right: 1)), [1, 8, 11, 9]),
        ]
        for (spec, input) in cases {
            let g = try spec.geometry(input: input)
            let x = awkwardValues(g.inputShape.count, seed: 11).map { $0.isFinite && abs($0) < 1e3 ? $0 : 0.5 }
            let w = awkwardValues(g.weightShape.count, seed: 12).map { $0.isFinite && abs($0) < 1e3 ? $0 : 0.25 }
            let b = awkwardValues(g.outChannels, seed: 13).map { $0.isFinite && abs($0) < 1e3 ? $0 : 1 }
            var outputs: [CPUVectorLevel: [Float]] = [:]
            try atEachLevel { level in
                let be = CPUBackend(threads: 2)
                XCTAssertTrue(be.usesGroupedDirect(g), "\(spec)")
                let yb = try be.makeBuffer(count: g.outputShape.count)
                try be.convolutionForward(g, input: try be.makeBuffer(x), weights: try be.makeBuffer(w), bias: try be.makeBuffer(b),
                                          output: yb, epilogue: nil)
                outputs[level] = try be.download(yb)
            }
            let reference = try Reference.convolutionForward(g, input: x.map(Double.init), weights: w.map(Double.init),
                                                              bias: b.map(Double.init))
            assertWithin(outputs[.baseline]!, reference, atol: 1e-3, rtol: 1e-4, "\(spec) against the reference")
            for level in runnable.dropFirst() { assertSameBits(outputs[level]!, outputs[.baseline]!, "\(level) \(spec)") }
        }
    }

    func testOptimizersHalvesAndPixelsAgreeBitForBitAcrossLevels() throws {
        let count = 10_007
        let w = awkwardValues(count, seed: 3).map { $0.isFinite ? $0 : 1 }, grad = awkwardValues(count, seed: 4).map { $0.isFinite ? $0 : -1 }
        var results: [CPUVectorLevel: [[Float]]] = [:]
        try atEachLevel { level in
            let be = CPUBackend()
            var out: [[Float]] = []
            let wb = try be.makeBuffer(w), gb = try be.makeBuffer(grad), vb = try be.makeBuffer([Float](repeating: 0.25, count: count))
            for _ in 0..<2 {
                try be.sgdStep(SGDHyperparameters(learningRate: 0.01, momentum: 0.9, weightDecay: 1e-4), parameter: wb,
                               gradient: gb, velocity: vb, count: count)
            }
            out += [try be.download(wb), try be.download(vb)]
            let aw = try be.makeBuffer(w), m = try be.makeBuffer(count: count), v = try be.makeBuffer(count: count)
            try be.fill(m, with: 0); try be.fill(v, with: 0)
            for step in 1...3 {
                try be.adamStep(AdamHyperparameters(learningRate: 0.001, weightDecay: 0.01), step: step, parameter: aw,
                                gradient: gb, m: m, v: v, count: count)
            }
            out += [try be.download(aw), try be.download(m), try be.download(v)]
            // Every half bit pattern to float, and floats to halves: Swift's Float16 is the definition.
            let allHalves = (0..<65536).map { UInt16($0) }
            let packed = stride(from: 0, to: 65536, by: 2).map { Float(bitPattern: UInt32(allHalves[$0]) | UInt32(allHalves[$0 + 1]) << 16) }
            let hb = try be.makeBuffer(packed), fb = try be.makeBuffer(count: 65536)
            try be.copyRows(hb, rows: [0], to: fb, rows: [0], rowLength: 65536, toHalf: false)
            let floats = try be.download(fb)
            for (i, f) in floats.enumerated() where !f.isNaN {
                XCTAssertEqual(f.bitPattern, Float(Float16(bitPattern: UInt16(i))).bitPattern, "\(level) half \(i)")
            }
            XCTAssertEqual(floats.filter(\.isNaN).count, allHalves.filter { Float16(bitPattern: $0).isNaN }.count, "\(level)")
            let source = awkwardValues(count, seed: 5).map { $0 * 1e-3 } + [65504, 65520, 70000, 6e-8, 3e-5, 1.00048828125]
            let sb = try be.makeBuffer(source), halves = try be.makeBuffer(count: (source.count + 1) / 2)
            try be.copyRows(sb, rows: [0], to: halves, rows: [0], rowLength: source.count, toHalf: true)
            let raw = try be.download(halves).flatMap { [UInt16(truncatingIfNeeded: $0.bitPattern), UInt16($0.bitPattern >> 16)] }
            for (i, f) in source.enumerated() where !f.isNaN {
                XCTAssertEqual(raw[i], Float16(f).bitPattern, "\(level) to half \(f)")
            }
            // 8-bit pixels with and without the scaler.
            let shape = Shape(n: 2, c: 3, h: 17, w: 19)
            let pixels = (0..<shape.count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            let scale: [Float] = [0.017, 1.0 / 255, 2], shift: [Float] = [-1.3, 0, -0.5]
            let (sc, sh) = (try be.makeBuffer(scale), try be.makeBuffer(shift))
            let yb = try be.makeBuffer(count: shape.count), yPlain = try be.makeBuffer(count: shape.count)
            try pixels.withUnsafeBufferPointer {
                try be.uploadPixels($0, shape: shape, scale: sc, shift: sh, to: yb)
                try be.uploadPixels($0, shape: shape, scale: nil, shift: nil, to: yPlain)
            }
            let plane = shape.h * shape.w
            assertSameBits(try be.download(yb), pixels.enumerated().map { i, p in
                let c = (i / plane) % shape.c
                return scale[c] * Float(p) + shift[c]
            }, "\(level) pixels")
            assertSameBits(try be.download(yPlain), pixels.map(Float.init), "\(level) plain pixels")
            results[level] = out
        }
        let names = ["sgd w", "sgd velocity", "adam w", "adam m", "adam v"]
        for level in runnable.dropFirst() {
            for (i, name) in names.enumerated() {
                assertSameBits(results[level]![i], results[.baseline]![i], "\(level) against baseline: \(name)")
            }
        }
    }

    func testAnUnknownOrMissingLevelFallsBackToTheBestWithOneWarning() {
        let lacking = CPUVectorLevel.resolve("avx512", supported: .avx2)
        XCTAssertEqual(lacking.level, .avx2)
        XCTAssertTrue(lacking.warning?.contains("UPDRAFT_CPU_LEVEL=avx512 needs AVX-512") == true, lacking.warning ?? "none")
        XCTAssertTrue(lacking.warning?.contains("using avx2") == true, lacking.warning ?? "none")
        let none = CPUVectorLevel.resolve("avx2", supported: .baseline)
        XCTAssertEqual(none.level, .baseline)
        XCTAssertTrue(none.warning?.contains("lacks; using baseline") == true, none.warning ?? "none")
        let unknown = CPUVectorLevel.resolve("AVX2 ", supported: .avx512)
        XCTAssertEqual(unknown.level, .avx512)
        XCTAssertTrue(unknown.warning?.contains("is not a vector level (baseline, avx2 or avx512)") == true, unknown.warning ?? "none")
        for level in CPUVectorLevel.allCases {
            XCTAssertEqual(CPUVectorLevel.resolve(level.description, supported: .avx512).level, level)
            XCTAssertNil(CPUVectorLevel.resolve(level.description, supported: .avx512).warning)
        }
        XCTAssertEqual(CPUVectorLevel.resolve(nil, supported: .avx2).level, .avx2)
        XCTAssertNil(CPUVectorLevel.resolve("", supported: .avx2).warning)
        // Forcing past what the CPU runs installs the best it has, never more.
        let start = CPUVectorLevel.active
        defer { CPUVectorLevel.force(start) }
        XCTAssertEqual(CPUVectorLevel.force(.avx512), CPUVectorLevel.supported)
    }

    /// Through the environment, as a user sets it: `updraft devices --json` names the level, a forced
    /// lower level is used, and a level the CPU lacks or an unknown name gives one warning and the best level.
    func testTheEnvironmentVariableForcesALevelOrWarnsOnce() throws {
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("vector-level-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        // No OpenCL platform, so only the CPU is calibrated.
        let noICD = cache.appendingPathComponent("no-icd")
        try FileManager.default.createDirectory(at: noICD, withIntermediateDirectories: true)
        func devices(_ request: String) throws -> (level: String?, warnings: Int, stderr: String, oneDNN: String?) {
            let run = try runUpdraft(["devices", "--json"], cacheDirectory: cache,
                                     environment: ["UPDRAFT_CPU_LEVEL": request, "OCL_ICD_VENDORS": noICD.path])
            XCTAssertEqual(run.status, 0, run.stderr)
            let start = run.stdout.firstIndex(of: "{") ?? run.stdout.startIndex
            let json = try JSONSerialization.jsonObject(with: Data(run.stdout[start...].utf8)) as? [String: Any]
            let cpu = json?["cpu"] as? [String: Any]
            let warnings = run.stderr.components(separatedBy: "\n").filter { $0.contains("UPDRAFT_CPU_LEVEL=") }.count
            let oneDNN = cpu?["oneDNN"] as? [String: Any]
            return (cpu?["vectorLevel"] as? String, warnings, run.stderr, oneDNN?["isa"] as? String)
        }
        let best = CPUVectorLevel.supported.description
        let forced = try devices("baseline")
        XCTAssertEqual(forced.level, "baseline")
        XCTAssertEqual(forced.warnings, 0, forced.stderr)
        // oneDNN's code is capped with it (SSE4.1 is its lowest), unless oneDNN is not installed.
        if OneDNN.isAvailable && CPUVectorLevel.supported != .baseline { XCTAssertEqual(forced.oneDNN, "sse41") }
        let unknown = try devices("avx9000")
        XCTAssertEqual(unknown.level, best)
        XCTAssertEqual(unknown.warnings, 1, unknown.stderr)
        if OneDNN.isAvailable && CPUVectorLevel.supported != .baseline { XCTAssertNotEqual(unknown.oneDNN, "sse41") }
        if CPUVectorLevel.supported != .avx512 {
            let lacking = try devices("avx512")
            XCTAssertEqual(lacking.level, best)
            XCTAssertEqual(lacking.warnings, 1, lacking.stderr)
        }
    }
}
