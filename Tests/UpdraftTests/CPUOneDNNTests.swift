import CDNNL
import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

/// oneDNN, the CPU backend's second convolution engine: its three passes against the Double reference
/// on strided, padded, dilated, grouped (and depthwise), 1x1 and 3x3 shapes, in its blocked layouts and
/// on plain NCHW, at 1 and 3 threads, with gradient buffers that start dirty; the stored per-shape
/// choice and its machine key. Skipped where libdnnl.so.2 is not installed.
final class CPUOneDNNTests: XCTestCase {
    private func requireOneDNN() throws {
        if let reason = OneDNN.unavailableReason { throw XCTSkip("oneDNN unavailable: \(reason)") }
    }

    private let shapes: [(ConvolutionSpec, Shape)] = [
        (ConvolutionSpec(inputChannels: 5, outputChannels: 7, kernelH: 3, kernelW: 3,
                         padding: .valid(top: 1, bottom: 1, left: 1, right: 1)), [2, 5, 9, 11]),
        (ConvolutionSpec(inputChannels: 16, outputChannels: 32, kernelH: 1, kernelW: 1, hasBias: false), [3, 16, 7, 6]),
        (ConvolutionSpec(inputChannels: 3, outputChannels: 8, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2), [2, 3, 15, 13]),
        (ConvolutionSpec(inputChannels: 6, outputChannels: 4, kernelH: 5, kernelW: 3, strideH: 2, strideW: 1,
                         padding: .valid(top: 2, bottom: 0, left: 1, right: 2)), [1, 6, 10, 8]),
        (ConvolutionSpec(inputChannels: 4, outputChannels: 6, kernelH: 3, kernelW: 3, dilationH: 2, dilationW: 2,
                         padding: .valid(top: 2, bottom: 2, left: 2, right: 2)), [2, 4, 9, 9]),
        (ConvolutionSpec(inputChannels: 8, outputChannels: 12, kernelH: 3, kernelW: 3, groups: 4,
                         padding: .valid(top: 1, bottom: 1, left: 1, right: 1)), [2, 8, 8, 7]),
        (ConvolutionSpec(inputChannels: 16, outputChannels: 16, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2, groups: 16,
                         padding: .valid(top: 1, bottom: 1, left: 1, right: 1)), [2, 16, 14, 14]),
        // SqueezeNet's conv1 (stride 2, 7x7 -> 3x3 kernel on 3 channels) at a small size.
        (ConvolutionSpec(inputChannels: 3, outputChannels: 64, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2), [2, 3, 33, 33]),
    ]

    func testThreePassesMatchReference() throws {
        try requireOneDNN()
        for (i, (spec, input)) in shapes.enumerated() {
            let g = try spec.geometry(input: input)
            let seed = UInt64(40 + 10 * i)
            let (x, w, b, dy) = randomWeightedOperands(x: g.inputShape.count, w: g.weightShape.count,
                                                       bias: spec.hasBias ? g.outChannels : nil, dy: g.outputShape.count, seed: seed)
            let d = { (v: [Float]) in v.map(Double.init) }
            let y = try Reference.convolutionForward(g, input: d(x), weights: d(w), bias: b.map(d))
            let dx = try Reference.convolutionBackwardData(g, outputGradient: d(dy), weights: d(w))
            let (dw, db) = try Reference.convolutionBackwardWeights(g, input: d(x), outputGradient: d(dy))
            for blocked in [true, false] {
                for threads in [1, 3] {
                    let be = CPUBackend(threads: threads)
                    be.convolutionAlgorithmOverride = .onednn
                    be.oneDNNBlockedLayouts = blocked
                    let what = "case \(i) \(spec) on \(input), \(blocked ? "blocked" : "plain"), \(threads) threads"
                    for pass in CPUConvolutionPass.allCases {
                        XCTAssertNotNil(be.oneDNNImplementation(g, pass), "\(what): oneDNN has no \(pass.rawValue) primitive")
                    }
                    XCTAssertEqual(be.forwardAlgorithm(for: g), .onednn, what)
                    XCTAssertEqual(be.backwardDataAlgorithm(for: g), .onednn, what)
                    XCTAssertEqual(be.backwardWeightsAlgorithm(for: g), .onednn, what)
                    let xb = try be.makeBuffer(x), wb = try be.makeBuffer(w), dyb = try be.makeBuffer(dy)
                    let bb = try b.map { try be.makeBuffer($0) }
                    let dirty = { (n: Int) in try be.makeBuffer(Tensor(shape: [n], uniformIn: 5...6, seed: 9)) }
                    let yb = try dirty(g.outputShape.count), dxb = try dirty(g.inputShape.count)
                    let dwb = try dirty(g.weightShape.count), dbb = try dirty(g.outChannels)
                    try be.convolutionForward(g, input: xb, weights: wb, bias: bb, output: yb, epilogue: nil)
                    assertWithin(try be.download(yb), y, "\(what) forward")
                    try be.convolutionForward(g, input: xb, weights: wb, bias: bb, output: yb, epilogue: .relu)
                    assertWithin(try be.download(yb), y.map { max(0, $0) }, "\(what) forward + ReLU")
                    try be.convolutionBackwardData(g, outputGradient: dyb, weights: wb, inputGradient: dxb)
                    assertWithin(try be.download(dxb), dx, "\(what) dx")
                    try be.convolutionBackwardWeights(g, input: xb, outputGradient: dyb, weightGradient: dwb,
                                                      biasGradient: spec.hasBias ? dbb : nil)
                    assertWithin(try be.download(dwb), dw, atol: 1e-3, "\(what) dw")
                    if spec.hasBias { assertWithin(try be.download(dbb), db, atol: 1e-3, "\(what) db") }
                }
            }
        }
    }

    /// The forward pass lets oneDNN choose its algorithm: on an AVX-512 CPU, at 16 images and channel
    /// counts that are multiples of 16, it takes its Winograd F(4x4, 3x3) (jit_wino_4x3), whose larger
    /// transform constants round more than the direct convolution; its output (with bias and the fused
    /// ReLU, into blocked layouts) is held to the reference as Updraft's own F(4x4, 3x3) is.
    func testWinogradForwardMatchesReference() throws {
        try requireOneDNN()
        // (Smaller shapes, 9 images, or fewer than 32 channels at 28 x 28 it runs direct; measured.)
        let shapes: [(ConvolutionSpec, Shape)] = [
            (ConvolutionSpec(inputChannels: 32, outputChannels: 32, kernelH: 3, kernelW: 3,
                             padding: .valid(top: 1, bottom: 1, left: 1, right: 1)), [16, 32, 28, 27]),
        ]
        var winograd = 0
        for (i, (spec, input)) in shapes.enumerated() {
            let g = try spec.geometry(input: input)
            let seed = UInt64(90 + 10 * i)
            let x = randomFloats(g.inputShape.count, seed: seed), w = randomFloats(g.weightShape.count, seed: seed + 1)
            let b = spec.hasBias ? randomFloats(g.outChannels, seed: seed + 2) : nil
            let d = { (v: [Float]) in v.map(Double.init) }
            let y = try Reference.convolutionForward(g, input: d(x), weights: d(w), bias: b.map(d))
            for threads in [1, 3] {
                let be = CPUBackend(threads: threads)
                be.convolutionAlgorithmOverride = .onednn
                let implementation = be.oneDNNImplementation(g, .forward) ?? "none"
                if implementation.contains("wino") { winograd += 1 }
                let what = "case \(i) \(spec) on \(input), \(threads) threads, \(implementation)"
                let xb = try be.makeBuffer(x), wb = try be.makeBuffer(w), bb = try b.map { try be.makeBuffer($0) }
                let yb = try be.makeBuffer(Tensor(shape: [g.outputShape.count], uniformIn: 5...6, seed: 9))
                try be.convolutionForward(g, input: xb, weights: wb, bias: bb, output: yb, epilogue: nil)
                assertWithin(try be.download(yb), y, atol: 1e-4, rtol: 1e-4, "\(what) forward")
                try be.convolutionForward(g, input: xb, weights: wb, bias: bb, output: yb, epilogue: .relu)
                assertWithin(try be.download(yb), y.map { max(0, $0) }, atol: 1e-4, rtol: 1e-4, "\(what) forward + ReLU")
            }
        }
        // Not a skip: on an AVX-512 CPU the Winograd path must have been the one checked.
        if OneDNN.isa?.hasPrefix("avx512") == true { XCTAssertGreaterThan(winograd, 0, "oneDNN chose its Winograd for none of the shapes") }
    }

    /// oneDNN's code is capped at the vector level the process started with (`UPDRAFT_CPU_LEVEL`;
    /// `make test` runs this class again at baseline): at baseline it generates SSE4.1 and no
    /// primitive's implementation names an AVX kernel; at avx2, nothing of AVX-512.
    func testGeneratedCodeStaysWithinTheVectorLevel() throws {
        try requireOneDNN()
        let isa = try XCTUnwrap(OneDNN.isa)
        let expected: String? = switch ProcessInfo.processInfo.environment[CPUVectorLevel.variable] {
        case "baseline" where CPUVectorLevel.supported != .baseline: "sse41"
        case "avx2" where CPUVectorLevel.supported == .avx512: "avx2"
        default: nil
        }
        if let expected { XCTAssertEqual(isa, expected) }
        let forbidden = isa == "sse41" ? "avx" : isa.hasPrefix("avx2") ? "avx512" : nil
        let be = CPUBackend(threads: 2)
        be.convolutionAlgorithmOverride = .onednn
        for (spec, input) in shapes {
            let g = try spec.geometry(input: input)
            for pass in CPUConvolutionPass.allCases {
                let implementation = try XCTUnwrap(be.oneDNNImplementation(g, pass), "\(spec) \(pass.rawValue)")
                if let forbidden { XCTAssertFalse(implementation.contains(forbidden), "\(implementation) under a cap of \(isa)") }
            }
        }
    }

    /// A primitive splits its work for the OpenMP thread count of the thread that creates it, so the
    /// backend sets its own count first: a 1-thread backend's primitive made on a fresh thread (whose
    /// count is every core) must not run on every core.
    func testPrimitivesAreMadeForTheBackendsThreadCount() throws {
        try requireOneDNN()
        let g = try ConvolutionSpec(inputChannels: 8, outputChannels: 8, kernelH: 3, kernelW: 3).geometry(input: [2, 8, 9, 9])
        final class Seen: @unchecked Sendable { var threads: Int32 = -1 }
        for threads in [1, 3] {
            let seen = Seen(), done = DispatchSemaphore(value: 0)
            Thread {
                let be = CPUBackend(threads: threads)
                be.convolutionAlgorithmOverride = .onednn
                _ = be.oneDNNImplementation(g, .forward)
                seen.threads = updraft_dnnl_max_threads()
                done.signal()
            }.start()
            done.wait()
            XCTAssertEqual(Int(seen.threads), threads, "OpenMP threads in effect when a \(threads)-thread backend made its primitive")
        }
    }

    /// A channel slice of a wider output (a concatenation's input) with a non-ReLU epilogue: the other
    /// channels are left as they were.
    func testForwardIntoChannelSlice() throws {
        try requireOneDNN()
        let spec = ConvolutionSpec(inputChannels: 6, outputChannels: 5, kernelH: 3, kernelW: 3,
                                   padding: .valid(top: 1, bottom: 1, left: 1, right: 1))
        let g = try spec.geometry(input: [3, 6, 7, 8])
        let (offset, total, S) = (3, 11, g.outHeight * g.outWidth)
        let x = randomFloats(g.inputShape.count, seed: 1), w = randomFloats(g.weightShape.count, seed: 2)
        let b = randomFloats(g.outChannels, seed: 3)
        let y = try Reference.convolutionForward(g, input: x.map(Double.init), weights: w.map(Double.init), bias: b.map(Double.init))
        let start = Tensor(shape: [g.batch, total, g.outHeight, g.outWidth], uniformIn: 5...6, seed: 4)
        var expected = start.data.map(Double.init)
        for n in 0..<g.batch {
            for i in 0..<(g.outChannels * S) {
                let v = y[n * g.outChannels * S + i]
                expected[(n * total + offset) * S + i] = v > 0 ? v : 0.1 * v
            }
        }
        for blocked in [true, false] {
            let be = CPUBackend(threads: 2)
            be.convolutionAlgorithmOverride = .onednn
            be.oneDNNBlockedLayouts = blocked
            let yb = try be.makeBuffer(start)
            try be.convolutionForward(g, input: try be.makeBuffer(x), weights: try be.makeBuffer(w), bias: try be.makeBuffer(b),
                                      output: yb, channelOffset: offset, outputChannels: total, epilogue: .leakyReLU(alpha: 0.1))
            assertWithin(try be.download(yb), expected, "slice, \(blocked ? "blocked" : "plain")")
        }
    }

    /// The stored choice is used for its shape and pass only, and only on the machine key it was stored
    /// under: another CPU model or oneDNN version reads nothing.
    func testStoredChoiceIsPerShapeAndMachine() throws {
        try requireOneDNN()
        let spec = ConvolutionSpec(inputChannels: 8, outputChannels: 8, kernelH: 1, kernelW: 1)
        let g = try spec.geometry(input: [2, 8, 5, 5]), other = try spec.geometry(input: [3, 8, 5, 5])
        var tuning = CPUConvolutionTuning()
        tuning.set(.onednn, for: g, .forward)
        tuning.set(.onednn, for: g, .backwardWeights)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-onednn-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let key = CPUConvolutionTuning.machineKey(threads: 2)
        try tuning.store(directory: directory, machineKey: key)
        XCTAssertEqual(CPUConvolutionTuning.load(directory: directory, machineKey: key)?.choices, tuning.choices)
        XCTAssertNil(CPUConvolutionTuning.load(directory: directory,
                                               machineKey: CPUConvolutionTuning.machineKey(cpuName: "Another CPU", threads: 2)))
        XCTAssertNil(CPUConvolutionTuning.load(directory: directory,
                                               machineKey: CPUConvolutionTuning.machineKey(oneDNNVersion: "9.9.9 (OpenMP)", threads: 2)))
        XCTAssertNil(CPUConvolutionTuning.load(directory: directory, machineKey: CPUConvolutionTuning.machineKey(threads: 3)))
        let be = CPUBackend(threads: 2)
        be.convolutionAlgorithmOverride = nil
        be.convolutionTuning = CPUConvolutionTuning.stored(threads: 2, environment: [CacheDirectory.variable: directory.path])
        XCTAssertEqual(be.forwardAlgorithm(for: g), .onednn)
        XCTAssertEqual(be.backwardWeightsAlgorithm(for: g), .onednn)
        XCTAssertEqual(be.backwardDataAlgorithm(for: g), .im2col)
        // Another shape reads nothing stored: the built-in rule's choice (the direct convolution, a 1x1 with K = 8).
        XCTAssertEqual(be.forwardAlgorithm(for: other), .direct)
        XCTAssertTrue(be.convolutionEngine(g, backward: false, inputGradient: false).hasPrefix("oneDNN "))
    }
}
