import Foundation
import XCTest
import CDNNL
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftPlacement

/// oneDNN as the CPU backend's second engine for pooling and inner product: every pass against the
/// Double reference (max with ceil mode and padding, average with and without padding, global; inner
/// products with and without bias, with an epilogue) at 1 and 3 threads with output buffers that start
/// dirty; the shapes it must not take; the stored per-shape choice; `updraft tune --cpu`'s measurement.
/// The oneDNN cases are skipped where libdnnl.so.2 is not installed.
final class CPUOneDNNOpsTests: XCTestCase {
    private func requireOneDNN() throws {
        if let reason = OneDNN.unavailableReason { throw XCTSkip("oneDNN unavailable: \(reason)") }
    }

    private let ceil3x3 = PoolingPadding.includeLastPixel(height: 0, width: 0)

    private var pools: [(PoolingSpec, Shape)] {
        [
            (PoolingSpec(kind: .max, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2, padding: ceil3x3), [2, 3, 14, 14]),  // SqueezeNet's pools
            (PoolingSpec(kind: .max, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2, padding: ceil3x3), [2, 4, 13, 13]),
            (PoolingSpec(kind: .max, kernelH: 3, kernelW: 2, strideH: 1, strideW: 2,
                         padding: .valid(top: 1, bottom: 1, left: 1, right: 0)), [1, 5, 9, 8]),
            (PoolingSpec(kind: .average, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2,
                         padding: .valid(top: 1, bottom: 1, left: 1, right: 1)), [2, 3, 11, 10]),
            (PoolingSpec(kind: .average, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2,
                         padding: .valid(top: 1, bottom: 1, left: 1, right: 1), excludePadding: false), [2, 3, 11, 11]),
            (PoolingSpec(kind: .average, kernelH: 2, kernelW: 2, strideH: 2, strideW: 2), [3, 2, 8, 6]),
            (PoolingSpec(kind: .average, global: true), [3, 7, 5, 5]),  // the classifier's global average
            (PoolingSpec(kind: .max, global: true), [2, 4, 3, 6]),
        ]
    }

    func testPoolingMatchesReference() throws {
        try requireOneDNN()
        for (i, (spec, input)) in pools.enumerated() {
            let g = try spec.geometry(input: input)
            let x = randomFloats(g.inputShape.count, seed: UInt64(70 + i)), dy = randomFloats(g.outputShape.count, seed: UInt64(90 + i))
            let d = { (v: [Float]) in v.map(Double.init) }
            let y = try Reference.poolingForward(g, input: d(x))
            let dx = try Reference.poolingBackward(g, input: d(x), outputGradient: d(dy))
            for threads in [1, 3] {
                let be = CPUBackend(threads: threads)
                be.opEngineOverride = .onednn
                let what = "case \(i) \(spec) on \(input), \(threads) threads"
                XCTAssertEqual(be.engine(for: .pooling(g), .forward), .onednn, what)
                XCTAssertEqual(be.engine(for: .pooling(g), .backward), .onednn, what)
                let dirty = { (n: Int) in try be.makeBuffer(Tensor(shape: [n], uniformIn: 5...6, seed: 9)) }
                let xb = try be.makeBuffer(x), dyb = try be.makeBuffer(dy)
                let yb = try dirty(g.outputShape.count), dxb = try dirty(g.inputShape.count)
                try be.poolingForward(g, input: xb, output: yb)
                assertWithin(try be.download(yb), y, "\(what) forward")
                try be.poolingBackward(g, input: xb, output: yb, outputGradient: dyb, inputGradient: dxb)
                assertWithin(try be.download(dxb), dx, "\(what) dx")
            }
        }
    }

    func testInnerProductMatchesReference() throws {
        try requireOneDNN()
        let shapes = [InnerProductGeometry(batch: 3, inputChannels: 7, outputChannels: 5, hasBias: true),
                      InnerProductGeometry(batch: 4, inputChannels: 100, outputChannels: 10, hasBias: true),
                      InnerProductGeometry(batch: 2, inputChannels: 33, outputChannels: 17, hasBias: false)]
        for (i, g) in shapes.enumerated() {
            let seed = UInt64(20 + 10 * i)
            let (x, w, b, dy) = randomWeightedOperands(x: g.inputShape.count, w: g.weightShape.count,
                                                       bias: g.hasBias ? g.outputChannels : nil, dy: g.outputShape.count, seed: seed)
            let d = { (v: [Float]) in v.map(Double.init) }
            let y = try Reference.innerProductForward(g, input: d(x), weights: d(w), bias: b.map(d))
            let yRelu = try Reference.innerProductForward(g, input: d(x), weights: d(w), bias: b.map(d), epilogue: .relu)
            let dx = try Reference.innerProductBackwardData(g, outputGradient: d(dy), weights: d(w))
            let (dw, db) = try Reference.innerProductBackwardWeights(g, input: d(x), outputGradient: d(dy))
            for threads in [1, 3] {
                let be = CPUBackend(threads: threads)
                be.opEngineOverride = .onednn
                let what = "inner product \(g.inputShape) -> \(g.outputShape), bias \(g.hasBias), \(threads) threads"
                for pass in CPUOpPass.passes(pooling: false) {
                    XCTAssertEqual(be.engine(for: .innerProduct(g), pass), .onednn, "\(what) \(pass.rawValue)")
                }
                let dirty = { (n: Int) in try be.makeBuffer(Tensor(shape: [n], uniformIn: 5...6, seed: 9)) }
                let xb = try be.makeBuffer(x), wb = try be.makeBuffer(w), dyb = try be.makeBuffer(dy)
                let bb = try b.map { try be.makeBuffer($0) }
                let yb = try dirty(g.outputShape.count), dxb = try dirty(g.inputShape.count)
                let dwb = try dirty(g.weightShape.count), dbb = try dirty(g.outputChannels)
                try be.innerProductForward(g, input: xb, weights: wb, bias: bb, output: yb, epilogue: nil)
                assertWithin(try be.download(yb), y, "\(what) forward")
                try be.innerProductForward(g, input: xb, weights: wb, bias: bb, output: yb, epilogue: .relu)
                assertWithin(try be.download(yb), yRelu, "\(what) forward + ReLU")
                try be.innerProductBackwardData(g, outputGradient: dyb, weights: wb, inputGradient: dxb)
                assertWithin(try be.download(dxb), dx, "\(what) dx")
                try be.innerProductBackwardWeights(g, input: xb, outputGradient: dyb, weightGradient: dwb,
                                                   biasGradient: g.hasBias ? dbb : nil)
                assertWithin(try be.download(dwb), dw, "\(what) dw")
                if g.hasBias { assertWithin(try be.download(dbb), db, "\(what) db") }
            }
        }
    }

    /// An average over padding whose ceil-mode window hangs past the padded input, and windows wholly
    /// in padding, are defined differently by oneDNN: they run (and match the reference) on the own path.
    /// Pooling and inner-product primitives are made for the backend's thread count, as the
    /// convolutions' are, even on a thread OpenMP has never seen (which would otherwise use every core).
    func testPrimitivesAreMadeForTheBackendsThreadCount() throws {
        try requireOneDNN()
        let shapes = [CPUOpShape.pooling(try pools[0].0.geometry(input: pools[0].1)),
                      .innerProduct(InnerProductGeometry(batch: 2, inputChannels: 9, outputChannels: 4, hasBias: true))]
        final class Seen: @unchecked Sendable { var threads: [Int32] = [] }
        for threads in [1, 3] {
            let seen = Seen(), done = DispatchSemaphore(value: 0)
            Thread {
                let be = CPUBackend(threads: threads)
                for shape in shapes {
                    updraft_dnnl_use_threads(7)  // what another backend on this thread left
                    _ = be.oneDNNImplementation(shape, .forward)
                    seen.threads.append(updraft_dnnl_max_threads())
                }
                done.signal()
            }.start()
            done.wait()
            XCTAssertEqual(seen.threads.map(Int.init), [threads, threads], "OpenMP threads when a \(threads)-thread backend made its primitives")
        }
    }

    func testShapesOneDNNDefinesDifferentlyRunTheOwnPath() throws {
        let cases: [(PoolingSpec, Shape)] = [
            (PoolingSpec(kind: .average, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2, padding: ceil3x3, excludePadding: false), [1, 2, 8, 8]),
            (PoolingSpec(kind: .max, kernelH: 2, kernelW: 2, strideH: 2, strideW: 2, padding: .valid(top: 2, bottom: 0, left: 0, right: 0)), [1, 2, 6, 6]),
        ]
        let be = CPUBackend(threads: 2)
        be.opEngineOverride = .onednn
        for (spec, input) in cases {
            let g = try spec.geometry(input: input)
            var why = ""
            XCTAssertNil(OneDNNOp.poolShape(g, why: &why), "\(spec)")
            XCTAssertFalse(why.isEmpty)
            XCTAssertEqual(be.engine(for: .pooling(g), .forward), .own, "\(spec)")
            let x = randomFloats(g.inputShape.count, seed: 5)
            let yb = try be.makeBuffer(count: g.outputShape.count)
            try be.poolingForward(g, input: try be.makeBuffer(x), output: yb)
            assertWithin(try be.download(yb), try Reference.poolingForward(g, input: x.map(Double.init)), "\(spec)")
        }
    }

    /// The stored choice is per shape and pass, in the convolution's tuning (files without it still load).
    func testStoredTuningChoosesTheEnginePerShapeAndPass() throws {
        let pool = CPUOpShape.pooling(try PoolingSpec(kind: .max, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2, padding: ceil3x3)
            .geometry(input: [2, 3, 14, 14]))
        let other = CPUOpShape.pooling(try PoolingSpec(kind: .max, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2, padding: ceil3x3)
            .geometry(input: [2, 3, 15, 14]))
        let ip = CPUOpShape.innerProduct(InnerProductGeometry(batch: 2, inputChannels: 9, outputChannels: 4, hasBias: true))
        XCTAssertNotEqual(pool.key, other.key)
        var tuning = CPUConvolutionTuning()
        XCTAssertNil(tuning.engine(pool, .backward))
        tuning.set(.onednn, for: pool, .backward)
        tuning.set(.own, for: ip, .forward)
        tuning.set(.onednn, for: ip, .backwardData)
        XCTAssertEqual(tuning.engine(pool, .backward), .onednn)
        XCTAssertNil(tuning.engine(pool, .forward))
        XCTAssertNil(tuning.engine(other, .backward))
        let decoded = try JSONDecoder().decode(CPUConvolutionTuning.self, from: try JSONEncoder().encode(tuning))
        XCTAssertEqual(decoded, tuning)
        // A file written before pooling and inner products were tuned.
        var older = CPUConvolutionTuning()
        older.opEngines = nil
        let old = try JSONDecoder().decode(CPUConvolutionTuning.self, from: try JSONEncoder().encode(older))
        XCTAssertNil(old.engine(pool, .backward))

        let be = CPUBackend(threads: 1)
        be.convolutionTuning = tuning
        XCTAssertEqual(be.engine(for: ip, .forward), .own)
        XCTAssertEqual(be.engine(for: other, .backward), .own)
        XCTAssertEqual(be.engine(for: pool, .forward), .own)
        XCTAssertEqual(be.engine(for: pool, .backward), OneDNN.isAvailable ? .onednn : .own)
        XCTAssertEqual(be.engine(for: ip, .backwardData), OneDNN.isAvailable ? .onednn : .own)
        be.opEngineOverride = .own
        XCTAssertEqual(be.engine(for: pool, .backward), .own, "the override wins over the stored choice")
    }

    func testProblemsFollowWhatTrainingRuns() throws {
        let graph = try NetworkGraph(model: try SqueezeNet.build(.init(classes: 10)))
        let problems = try CPUOpTuner.problems(forTraining: graph, batch: 2)
        let names = Set(problems.map(\.layer))
        for name in ["pool1", "pool3", "pool5", "pool10", "fullyconnected0"] { XCTAssertTrue(names.contains(name), name) }
        // conv10 is the first updatable layer: only the pooling after it runs backward; the head trains.
        XCTAssertEqual(Set(problems.filter { $0.op.subject is PoolingCase && $0.pass == .backwardData }.map(\.layer)), ["pool10"])
        XCTAssertEqual(Set(problems.filter { $0.pass == .backwardWeights }.map(\.layer)), ["fullyconnected0"])
        XCTAssertTrue(problems.contains { $0.layer == "fullyconnected0" && $0.pass == .backwardData })
        XCTAssertTrue(problems.allSatisfy { $0.op.subject is PoolingCase || $0.op.subject is InnerProductCase })
    }

    func testTuneChecksTimesAndStoresEveryProblem() throws {
        let pool = PoolingSpec(kind: .max, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2, padding: ceil3x3)
        let ip = InnerProductSpec(inputChannels: 64, outputChannels: 10, hasBias: true)
        let backend = CPUBackend(threads: 2)
        backend.opEngineOverride = .own
        let tuner = CPUOpTuner(settings: CPUTunerSettings(backend: backend, repeats: 2))
        let problems: [TunedPass] = [.pooling("pool", pool, input: [2, 8, 28, 28], .forward),
                                     .pooling("pool", pool, input: [2, 8, 28, 28], .backwardData),
                                     .innerProduct("fc", ip, input: [4, 64], .forward),
                                     .innerProduct("fc", ip, input: [4, 64], .backwardData),
                                     .innerProduct("fc", ip, input: [4, 64], .backwardWeights)]
        let (tuning, outcomes) = try tuner.tune(problems)
        XCTAssertEqual(backend.opEngineOverride, .own, "the backend's override is restored")
        XCTAssertEqual(outcomes.count, problems.count)
        for o in outcomes {
            let what = "\(o.problem.layer) \(o.pass.rawValue)"
            XCTAssertEqual(tuning.engine(o.shape, o.pass), o.choice, what)
            XCTAssertEqual(Set(o.milliseconds.keys), OneDNN.isAvailable ? [.own, .onednn] : [.own], what)
            XCTAssertTrue(o.milliseconds.values.allSatisfy { $0.isFinite && $0 >= 0 }, what)
            if OneDNN.isAvailable { XCTAssertNil(o.rejected, what) } else { XCTAssertEqual(o.choice, .own, what) }
            if o.choice == .onednn { XCTAssertLessThan(o.milliseconds[.onednn]! * 1.03, o.milliseconds[.own]!, what) }
        }
    }
}
