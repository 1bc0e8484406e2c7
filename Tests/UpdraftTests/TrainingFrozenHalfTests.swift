import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftLayers
@testable import UpdraftData
@testable import UpdraftTraining

/// `UpdateConfiguration.frozenActivationsHalfPrecision` (`updraft train --frozen-fp16`): the frozen
/// prefix's activations are stored as halves (half the bytes), training on the CPU twin, PoCL and the
/// Double reference agrees, stays near fp32, and the feature cache adds no rounding on top; with the
/// option off no half op runs at all; a model without a frozen prefix is refused by name.
final class TrainingFrozenHalfTests: XCTestCase {
    /// A SqueezeNet-shaped model whose frozen prefix holds every kind of layer SqueezeNet's has and
    /// more: a strided convolution with its ReLU fused, a ceil-mode max pool, an unfused ReLU (no half
    /// kernel: converted at its boundary), a fire module whose expands write their slices of the
    /// concat, and a windowed average pool. conv10 and the head train (or, with `trainFirst`, conv1 too:
    /// then nothing is frozen).
    static func model(trainFirst: Bool = false) throws -> CoreMLModel {
        let image = ImageFeatureType(width: 15, height: 15, colorSpace: .rgb)
        var b = try ModelBuilder(input: FeatureDescription(name: "image", type: .image(image)), seed: 5)
        try b.convolution("conv1", outputChannels: 8, kernel: (3, 3), stride: (2, 2))
        try b.activation("relu_conv1", .relu)
        try b.pooling("pool1", .max, kernel: (3, 3), stride: (2, 2), padding: .includeLastPixel(height: 0, width: 0))
        try b.activation("relu_pool1", .relu)
        try b.fireModule("fire2", squeeze: 5, expand1x1: 6, expand3x3: 7)
        try b.pooling("pool2", .average, kernel: (2, 2), stride: (1, 1), padding: .valid(top: 1, bottom: 0, left: 0, right: 1))
        try b.convolution("conv10", outputChannels: SqueezeShaped.classes, kernel: (1, 1))
        try b.activation("relu_conv10", .relu)
        try b.globalPoolClassifierHead(pool: "pool10", dense: "fullyconnected0", labels: .numbered(SqueezeShaped.classes))
        try b.makeUpdatable((trainFirst ? ["conv1"] : []) + ["conv10", "fullyconnected0"])
        try b.setCrossEntropyLoss(input: "probabilities")
        b.setOptimizer(.sgd(learningRate: 0.05, miniBatchSize: 4, momentum: 0.9))
        b.setEpochs(2)
        b.setShuffle(true, seed: 3)
        return try b.build()
    }

    func train(_ backend: Backend, half: Bool, _ configure: (inout UpdateConfiguration) -> Void = { _ in }) throws -> TrainingRun {
        try TrainingRun.train(try Self.model(), try SqueezeShaped.data(count: 12)) {
            $0.placement.backends = (backend, backend); $0.placement.fallbacks = []; $0.frozenActivationsHalfPrecision = half
            configure(&$0)
        }
    }

    func testPrefixActivationsAreStoredAsHalves() throws {
        let cl = OpenCLBackend(context: try OpenCLTestSupport.context())
        var bytes: [Bool: Int] = [:]
        for half in [false, true] {
            var training = try TrainingGraph(graph: try NetworkGraph(model: try Self.model()))
            training.halfPrecisionPrefix = half
            let e = try Executor(training: training, optimizer: .sgd, backend: cl)
            let ws = e.workspace(3)
            try e.uploadInput(Tensor(shape: [3, 3, 15, 15], uniformIn: 0...1, seed: 1), ws: ws)
            let blobs = Set(training.prefix.map(\.output))
            try e.forward(layers: training.prefix, ws: ws, keep: blobs)
            var total = 0
            for blob in ["relu_conv1", "pool1", "relu_pool1", "fire2/relu_squeeze1x1", "fire2/concat", "pool2"] {
                let v = try XCTUnwrap(ws.value(blob), "\(blob) was computed")
                let count = try XCTUnwrap(training.graph.blobShapes[blob]).withBatch(3).count
                XCTAssertEqual(ws.isHalf(blob), half, blob)
                XCTAssertEqual(v.buffer.count, half ? (count + 1) / 2 : count, "\(blob): two values per float")
                total += v.buffer.count
            }
            XCTAssertFalse(ws.isHalf(training.graph.input.name), "the network input stays fp32")
            bytes[half] = 4 * total
            // The tail reads the boundary as floats: converted once, in place of the half value.
            let boundary = try XCTUnwrap(training.boundary.first)
            XCTAssertEqual(boundary, "pool2")
            let wide = try e.value(boundary, on: cl, ws: ws)
            XCTAssertFalse(ws.isHalf(boundary))
            XCTAssertEqual(wide.count, try XCTUnwrap(training.graph.blobShapes[boundary]).withBatch(3).count)
            let values = try cl.download(wide)
            XCTAssertTrue(values.allSatisfy { $0 == Float(Float16($0)) } || !half, "the boundary carries the half rounding")
            ws.clearValues()
        }
        let (f, h) = (try XCTUnwrap(bytes[false]), try XCTUnwrap(bytes[true]))
        XCTAssertLessThanOrEqual(abs(2 * h - f), 4 * 6, "half the bytes (an odd count rounds up by one half): \(h) of \(f)")
    }

    func testCPUOpenCLAndReferenceAgreeAndStayNearFP32() throws {
        let cl = OpenCLBackend(context: try OpenCLTestSupport.context())
        let cpuHalf = try train(CPUBackend(), half: true)
        let clHalf = try train(cl, half: true)
        let referenceHalf = try train(ReferenceBackend(), half: true)
        let cpuFloat = try train(CPUBackend(), half: false)
        XCTAssertEqual(cpuHalf.losses.count, 6)
        assertSameTraining(cpuHalf, referenceHalf, tolerance: 1e-3, "CPU twin vs the Double reference, both fp16 prefix")
        assertSameTraining(clHalf, referenceHalf, tolerance: 1e-3, "PoCL half kernels vs the Double reference, both fp16 prefix")
        assertSameTraining(cpuHalf, cpuFloat, tolerance: 2e-2, "fp16 prefix vs fp32")
        let moved = zip(cpuHalf.losses, cpuFloat.losses).map { abs($0 - $1) }.max() ?? 0
        XCTAssertGreaterThan(moved, 0, "the option must change the stored activations")
    }

    /// The boundary blobs already carry the half rounding: the feature cache (fp32 or fp16) returns
    /// them exactly, so training with and without it is identical.
    func testFeatureCacheAddsNoRoundingOnTop() throws {
        let plain = try train(CPUBackend(), half: true) { $0.featureCache.enabled = false }
        let cached = try train(CPUBackend(), half: true)
        let cachedHalf = try train(CPUBackend(), half: true) { $0.featureCache.halfPrecision = true }
        XCTAssertEqual(try XCTUnwrap(cached.task.featureCacheStatistics).hits, 12)
        assertSameTraining(cached, plain, tolerance: 0, "fp16 prefix, cache on vs off")
        assertSameTraining(cachedHalf, plain, tolerance: 0, "fp16 prefix, fp16 cache vs no cache")
    }

    /// With the option off nothing runs in half (the fp32 path is the one before the option); with it
    /// on, PoCL runs the half kernels.
    func testOptionOffRunsNoHalfOp() throws {
        let cl = OpenCLBackend(context: try OpenCLTestSupport.context())
        for half in [false, true] {
            let counting = FailingBackend(cl)
            let run = try train(counting, half: half) { $0.featureCache.enabled = false }
            XCTAssertEqual(run.state, .completed, "\(run.error.map { "\($0)" } ?? "")")
            let halfCalls = [BackendCall.Kind.convolutionHalfForward, .poolingHalfForward, .copyHalfRows]
                .reduce(0) { $0 + (counting.calls[$1] ?? 0) }
            if half {
                XCTAssertGreaterThan(counting.calls[.convolutionHalfForward] ?? 0, 0)
                XCTAssertGreaterThan(counting.calls[.poolingHalfForward] ?? 0, 0)
            } else {
                XCTAssertEqual(halfCalls, 0, "option off: \(counting.calls)")
            }
        }
    }

    func testModelWithoutFrozenPrefixIsRefused() throws {
        let run = try TrainingRun.train(try Self.model(trainFirst: true), try SqueezeShaped.data(count: 4)) {
            $0.placement.backends = (CPUBackend(), CPUBackend()); $0.frozenActivationsHalfPrecision = true
        }
        XCTAssertEqual(run.state, .failed)
        let error = try XCTUnwrap(run.error as? UpdraftError, "\(String(describing: run.error))")
        XCTAssertEqual(error.kind, .invalidArgument)
        XCTAssertTrue(error.message.contains("--frozen-fp16") && error.message.contains("conv1"), error.message)
        XCTAssertTrue(error.hint?.contains("frozenActivationsHalfPrecision") ?? false)
    }

    /// A checkpoint records the setting: resuming from it takes it, and a run set the other way is
    /// refused by name (its losses would not continue the checkpoint's).
    func testACheckpointKeepsTheSettingAndAResumeMustAgree() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-frozen-half-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let url = folder.appendingPathComponent("half.mlmodel")
        let data = try SqueezeShaped.data(count: 12)
        let cpu = CPUBackend()
        var config = UpdateConfiguration()
        config.placement.backends = (cpu, cpu); config.placement.fallbacks = []
        config.frozenActivationsHalfPrecision = true
        config.checkpoints.everyMiniBatches = 3
        config.checkpoints.url = url
        let steps = Locked(0)
        let stopAtFour = UpdateHandlers(progress: { ctx in
            if case .miniBatchEnd = ctx.event, steps.mutate({ $0 += 1; return $0 }) == 4 { ctx.task.cancel() }
        })
        XCTAssertNil(UpdateTask(model: try Self.model(), trainingData: data, configuration: config, handlers: stopAtFour).run().error)

        let state = try TrainingCheckpoint.read(forModel: url)
        XCTAssertTrue(state.frozenActivationsHalfPrecision, "the .resume state keeps the setting")
        var plain = UpdateConfiguration()
        plain.placement.backends = (cpu, cpu); plain.placement.fallbacks = []
        let resumed = try UpdateTask(resumingFrom: url, trainingData: data, configuration: plain)
        XCTAssertTrue(resumed.configuration.frozenActivationsHalfPrecision, "resuming takes the checkpoint's setting")
        XCTAssertNil(resumed.run().error)

        var other = plain
        other.checkpoints.resumeFrom = state
        other.frozenActivationsHalfPrecision = false
        let refused = UpdateTask(model: try CoreMLModel(contentsOf: url), trainingData: data, configuration: other).run().error
        XCTAssertTrue("\(refused.map { "\($0)" } ?? "no error")".contains("stored its frozen activations in half precision"),
                      "\(String(describing: refused))")
    }
}
