import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftLayers
@testable import UpdraftData
@testable import UpdraftTraining

/// Preparation before the first step (issue 24): the preparation ops make the oneDNN primitives a
/// layer's passes will look up — keyed as the passes key them (fused ReLU, a concat slice's output
/// stride) — so that a prepared step makes none; the executor prepares exactly the primitives a step
/// makes, per batch size; a training run prepares before its first epoch and says how long it took.
/// Skipped where libdnnl.so.2 is not installed.
final class DevicePreparationTests: XCTestCase {
    private func requireOneDNN() throws {
        if let reason = OneDNN.unavailableReason { throw XCTSkip("oneDNN unavailable: \(reason)") }
    }

    /// A CPU backend that runs every convolution, pooling and inner product on oneDNN.
    private func oneDNNBackend() -> CPUBackend {
        let cpu = CPUBackend(threads: 2)
        cpu.convolutionAlgorithmOverride = .onednn
        cpu.opEngineOverride = .onednn
        return cpu
    }

    /// Primitives oneDNN was asked for so far, convolutions and the others.
    private func creations(_ cpu: CPUBackend) -> Int {
        cpu.oneDNNPrimitives.creationCount + cpu.oneDNNOpPrimitives.creationCount
    }

    func testPreparedConvolutionSliceWithReLUMakesNothingOnItsFirstCall() throws {
        try requireOneDNN()
        let spec = ConvolutionSpec(inputChannels: 4, outputChannels: 6, kernelH: 3, kernelW: 3,
                                   padding: .valid(top: 1, bottom: 1, left: 1, right: 1))
        let g = try spec.geometry(input: [2, 4, 7, 7])
        let cpu = oneDNNBackend()
        // A slice of a 10-channel concat, ReLU fused: the key the forward pass looks up.
        XCTAssertEqual(try cpu.prepareConvolution(g, passes: .all, epilogue: .relu, outputChannels: 10), 3)
        XCTAssertEqual(creations(cpu), 3)
        XCTAssertEqual(try cpu.prepareConvolution(g, passes: .all, epilogue: .relu, outputChannels: 10), 0, "made twice")
        let x = try cpu.makeBuffer(randomFloats(g.inputShape.count, seed: 1)), w = try cpu.makeBuffer(randomFloats(g.weightShape.count, seed: 2))
        let b = try cpu.makeBuffer(randomFloats(g.outChannels, seed: 3)), dy = try cpu.makeBuffer(randomFloats(g.outputShape.count, seed: 4))
        let y = try cpu.makeBuffer(count: 2 * 10 * 49), dx = try cpu.makeBuffer(count: g.inputShape.count)
        let dw = try cpu.makeBuffer(count: g.weightShape.count), db = try cpu.makeBuffer(count: g.outChannels)
        try cpu.convolutionForward(g, input: x, weights: w, bias: b, output: y, channelOffset: 4, outputChannels: 10, epilogue: .relu)
        try cpu.convolutionBackwardData(g, outputGradient: dy, weights: w, inputGradient: dx)
        try cpu.convolutionBackwardWeights(g, input: x, outputGradient: dy, weightGradient: dw, biasGradient: db)
        XCTAssertEqual(creations(cpu), 3, "a prepared pass made a primitive on its first call")
        // Unprepared: the whole output without the ReLU is another primitive, made on first use.
        try cpu.convolutionForward(g, input: x, weights: w, bias: b, output: y, epilogue: nil)
        XCTAssertEqual(creations(cpu), 4)
    }

    func testPoolingAndInnerProductPassesArePrepared() throws {
        try requireOneDNN()
        let cpu = oneDNNBackend()
        let pool = PoolGeometry(kind: .max, batch: 2, channels: 3, inHeight: 9, inWidth: 9, outHeight: 4, outWidth: 4,
                                kernelH: 3, kernelW: 3, strideH: 2, strideW: 2, padTop: 0, padBottom: 0, padLeft: 0, padRight: 0,
                                excludePadding: true)
        let ip = InnerProductGeometry(batch: 2, inputChannels: 12, outputChannels: 5, hasBias: true)
        XCTAssertEqual(try cpu.preparePooling(pool, backward: false), 1)
        XCTAssertEqual(try cpu.preparePooling(pool, backward: true), 1, "only the backward pass is new")
        XCTAssertEqual(try cpu.prepareInnerProduct(ip, passes: [.forward, .backwardWeights]), 2)
        let before = creations(cpu)
        let x = try cpu.makeBuffer(randomFloats(pool.inputShape.count, seed: 5)), y = try cpu.makeBuffer(count: pool.outputShape.count)
        let dy = try cpu.makeBuffer(randomFloats(pool.outputShape.count, seed: 6)), dx = try cpu.makeBuffer(count: pool.inputShape.count)
        try cpu.poolingForward(pool, input: x, output: y)
        try cpu.poolingBackward(pool, input: x, output: y, outputGradient: dy, inputGradient: dx)
        let ix = try cpu.makeBuffer(randomFloats(24, seed: 7)), iw = try cpu.makeBuffer(randomFloats(60, seed: 8))
        let ib = try cpu.makeBuffer(randomFloats(5, seed: 9)), iy = try cpu.makeBuffer(count: 10)
        let idy = try cpu.makeBuffer(randomFloats(10, seed: 10)), idw = try cpu.makeBuffer(count: 60), idb = try cpu.makeBuffer(count: 5)
        try cpu.innerProductForward(ip, input: ix, weights: iw, bias: ib, output: iy, epilogue: nil)
        try cpu.innerProductBackwardWeights(ip, input: ix, outputGradient: idy, weightGradient: idw, biasGradient: idb)
        XCTAssertEqual(creations(cpu), before, "a prepared pooling or inner-product pass made a primitive on its first call")
    }

    /// Where nothing is chosen for oneDNN (Updraft's own paths), on OpenCL and on the reference, a
    /// preparation makes nothing; an output narrower than the layer's is refused by name.
    func testNothingIsMadeWhereNothingIsAhead() throws {
        let g = try ConvolutionSpec(inputChannels: 4, outputChannels: 6, kernelH: 3, kernelW: 3).geometry(input: [2, 4, 7, 7])
        let own = CPUBackend(threads: 2)
        own.convolutionAlgorithmOverride = .im2col
        own.opEngineOverride = .own
        XCTAssertEqual(try own.prepareConvolution(g, passes: .all), 0)
        XCTAssertEqual(creations(own), 0)
        XCTAssertEqual(try ReferenceBackend().prepareConvolution(g, passes: .all), 0)
        XCTAssertThrowsError(try oneDNNBackend().prepareConvolution(g, passes: .forward, outputChannels: 5)) { error in
            XCTAssertTrue("\(error)".contains("cannot hold the layer's 6"), "\(error)")
        }
    }

    /// The fire-module model's training graph, its settings and one batch of 4.
    private func squeezeShapedStep() throws -> (TrainingGraph, TrainingParameters, TrainingBatch) {
        let training = try TrainingGraph(graph: try NetworkGraph(model: try SqueezeShaped.model(batch: 4)))
        let hyper = try TrainingParameters(optimizer: .sgd, hyperparameters: training.graph.hyperparameters)
        return (training, hyper, try SqueezeShaped.data(count: 4).batch(at: 0..<4))
    }

    /// The executor prepares exactly what a training step makes (fire module: convolutions writing
    /// their concat's slices with fused ReLUs, pooling, an inner product, a trained tail), and a
    /// prepared step makes nothing.
    func testExecutorPreparesWhatAStepMakes() throws {
        try requireOneDNN()
        let (training, hyper, batch) = try squeezeShapedStep()

        let fresh = oneDNNBackend()
        _ = try Executor(training: training, optimizer: .sgd, backend: fresh).trainStep(batch, parameters: hyper)
        let stepMakes = creations(fresh)
        XCTAssertGreaterThan(stepMakes, 8, "the step ran too few layers on oneDNN for the test to mean anything")

        let cpu = oneDNNBackend()
        let executor = try Executor(training: training, optimizer: .sgd, backend: cpu)
        let made = try executor.prepare(batch: 4)
        XCTAssertEqual(creations(cpu), stepMakes, "prepared \(creations(cpu)) primitives, a step makes \(stepMakes)")
        XCTAssertEqual(made, stepMakes)
        XCTAssertEqual(try executor.prepare(batch: 4), 0)
        _ = try executor.trainStep(batch, parameters: hyper)
        XCTAssertEqual(creations(cpu), stepMakes, "a prepared step made primitives")
    }

    /// ResNet's blocks with their adds fused into the convolutions (`TrainingGraph.fusedResiduals`): a
    /// prepared step makes no primitive either.
    func testExecutorPreparesFusedResidualBlocks() throws {
        try requireOneDNN()
        let training = try TrainingGraph(graph: try NetworkGraph(model: try ResidualFusionTests.model()))
        XCTAssertFalse(training.fusedResiduals.isEmpty)
        let hyper = try TrainingParameters(optimizer: .sgd, hyperparameters: training.graph.hyperparameters)
        let batch = try ArrayBatchProvider(examples: (0..<4).map {
            TrainingExample(input: Tensor(shape: [3, 10, 10], uniformIn: 0...255, seed: UInt64($0)), target: .classIndex($0 % 3))
        }).batch(at: 0..<4)
        let cpu = oneDNNBackend()
        let executor = try Executor(training: training, optimizer: .sgd, backend: cpu)
        XCTAssertGreaterThan(try executor.prepare(batch: 4), 0)
        let prepared = creations(cpu)
        _ = try executor.trainStep(batch, parameters: hyper)
        XCTAssertEqual(creations(cpu), prepared, "a prepared step made primitives")
    }

    /// With the prefix's start chunked (`PrefixChunking`, here 3 images at a time: 3 + 1), preparation
    /// makes the primitives of the chunks' sizes, and a prepared step makes none.
    func testExecutorPreparesTheChunksSizes() throws {
        try requireOneDNN()
        let (training, hyper, batch) = try squeezeShapedStep()
        // Room for 3 images of the largest prefix layer's inputs and output.
        let cacheBytes = 3 * 4 * training.prefix.map { $0.inputShapes.reduce($0.outputShape.count) { $0 + $1.count } }.max()!
        let plan = try XCTUnwrap(training.prefixChunking(layers: training.prefix, batch: 4, cacheBytes: cacheBytes, largeBlobBytes: 1))
        XCTAssertEqual(plan.images, 3)
        func executor(_ backend: CPUBackend) throws -> Executor {
            let e = try Executor(training: training, optimizer: .sgd, backend: backend)
            e.prefixChunkingLimits = (largeBlobBytes: 1, cacheBytes: cacheBytes)
            return e
        }
        let fresh = oneDNNBackend()
        _ = try executor(fresh).trainStep(batch, parameters: hyper)
        let stepMakes = creations(fresh)
        let cpu = oneDNNBackend()
        let prepared = try executor(cpu)
        XCTAssertEqual(try prepared.prepare(batch: 4), stepMakes)
        _ = try prepared.trainStep(batch, parameters: hyper)
        XCTAssertEqual(creations(cpu), stepMakes, "a prepared step made primitives")
        // Without the chunks' sizes the step would have made more than the whole batch's preparation.
        let whole = oneDNNBackend()
        let wholeBatch = try Executor(training: training, optimizer: .sgd, backend: whole)
        wholeBatch.chunksPrefix = false
        XCTAssertNotEqual(try wholeBatch.prepare(batch: 4), stepMakes)
    }

    /// `UpdateTask` prepares every batch size of the first epoch (here 4 and a short last batch of 2)
    /// before `trainingBegin`, and keeps the time it took.
    func testTrainingRunPreparesBeforeItsFirstEpoch() throws {
        try requireOneDNN()
        let cpu = oneDNNBackend()
        var config = UpdateConfiguration()
        config.placement.backends = (cpu, cpu)
        config.data.shortLastBatch = true
        let atBegin = Locked<Int?>(nil)
        let task = UpdateTask(model: try SqueezeShaped.model(batch: 4), trainingData: try SqueezeShaped.data(count: 10),
                              configuration: config, handlers: UpdateHandlers(events: [.trainingBegin], progress: { ctx in
                                  if ctx.event == .trainingBegin { let made = self.creations(cpu); atBegin.mutate { $0 = made } }
                              }))
        let done = task.run()
        XCTAssertNil(done.error)
        XCTAssertEqual(task.state, UpdateTaskState.completed)
        let prepared = try XCTUnwrap(atBegin.value)
        XCTAssertGreaterThan(prepared, 0)
        XCTAssertEqual(creations(cpu), prepared, "the epochs made primitives the preparation did not")
        let seconds = try XCTUnwrap(task.preparationSeconds)
        XCTAssertGreaterThan(seconds, 0)
    }

    /// The run's settings come from its configuration (`UpdraftEnvironment`, read once), not the
    /// process's environment: `UPDRAFT_PREPARE=off` there skips preparation, and the prefix-chunking
    /// switch reaches the run's executors.
    func testARunTakesItsSettingsFromItsConfiguration() throws {
        let off = UpdraftEnvironment(["UPDRAFT_PREPARE": "off", "UPDRAFT_PREFIX_CHUNKS": "off", "UPDRAFT_PIXEL_UPLOAD": "off"])
        XCTAssertFalse(off.preparesDevices)
        XCTAssertFalse(off.chunksPrefix)
        XCTAssertFalse(off.uploadsPixels)
        let on = UpdraftEnvironment([:])
        XCTAssertTrue(on.preparesDevices && on.chunksPrefix && on.uploadsPixels)
        for (environment, prepares) in [(off, false), (on, true)] {
            var config = UpdateConfiguration()
            config.placement.backends = (CPUBackend(threads: 1), CPUBackend(threads: 1))
            config.environment = environment
            XCTAssertEqual(config.pixelUpload, environment.uploadsPixels)
            let chunks = Locked<Bool?>(nil)
            let task = UpdateTask(model: try SqueezeShaped.model(batch: 4), trainingData: try SqueezeShaped.data(count: 4),
                                  configuration: config, handlers: UpdateHandlers(events: [.trainingBegin], progress: { ctx in
                                      let value = ctx.task.session?.devices.replicas.first?.chunksPrefix
                                      chunks.mutate { $0 = value }
                                  }))
            XCTAssertNil(task.run().error)
            XCTAssertEqual(task.preparationSeconds != nil, prepares, "prepared: \(String(describing: task.preparationSeconds))")
            XCTAssertEqual(chunks.value, environment.chunksPrefix)
        }
    }

    /// The CPU backend's settings come from the environment it is given, typed once: threads,
    /// `UPDRAFT_WINOGRAD`, `UPDRAFT_ONEDNN` and `UPDRAFT_ONEDNN_LAYOUT`; a run's host backend (its
    /// fallback here) is made with the run's environment, not the process's.
    func testTheCPUBackendTakesItsSettingsFromItsEnvironment() throws {
        let env = UpdraftEnvironment(["UPDRAFT_CPU_THREADS": "3", "UPDRAFT_WINOGRAD": "4x4", "UPDRAFT_ONEDNN_LAYOUT": "plain"])
        XCTAssertEqual(env.cpuThreads, 3)
        XCTAssertEqual(env.winograd, .f4x4)
        XCTAssertNil(env.oneDNN)
        let cpu = CPUBackend(environment: env)
        XCTAssertEqual(cpu.threadCount, 3)
        XCTAssertEqual(cpu.convolutionAlgorithmOverride, .winograd4x4)
        XCTAssertFalse(cpu.oneDNNBlockedLayouts)
        XCTAssertEqual(CPUBackend(threads: 2, environment: env).threadCount, 2, "a count given wins")
        let on = CPUBackend(environment: UpdraftEnvironment(["UPDRAFT_ONEDNN": "on", "UPDRAFT_WINOGRAD": "off"]))
        XCTAssertEqual(on.convolutionAlgorithmOverride, .onednn)
        XCTAssertEqual(on.opEngineOverride, .onednn)
        XCTAssertEqual(CPUBackend(environment: UpdraftEnvironment(["UPDRAFT_WINOGRAD": "off"])).convolutionAlgorithmOverride, .im2col)
        let bad = UpdraftEnvironment(["UPDRAFT_CPU_THREADS": "many"])
        XCTAssertEqual(bad.cpuThreads, HostInfo.usableCores)
        XCTAssertNotNil(bad.cpuThreadsWarning)

        // A run's fallback host backend: made with the run's environment.
        let shared = try OpenCLTestSupport.context()
        let device = OpenCLBackend(context: shared)
        let fallback = try XCTUnwrap(fallbackBackends(nil, running: [device], environment: env).first as? CPUBackend)
        XCTAssertEqual(fallback.threadCount, 3)
        XCTAssertEqual(fallback.convolutionAlgorithmOverride, .winograd4x4)
        // Prediction's fallback too (`InferenceRunner`, as `ModelPredictor` makes it with the run's environment).
        let runner = try InferenceRunner(graph: try NetworkGraph(model: try SqueezeShaped.model()), prefix: device, tail: device,
                                         environment: env, warn: { XCTFail($0) })
        XCTAssertEqual((runner.fallbacks.first as? CPUBackend)?.threadCount, 3)
    }

    /// On OpenCL, preparation builds the programs a step launches (issue 35: never inside epoch 1):
    /// the fire modules' convolutions with fused ReLUs writing concat slices, pooling, the inner
    /// product's three GEMMs, the loss and the optimizer; and ResNet blocks' convolutions with a fused
    /// residual (`-D RESIDUAL`). A prepared step builds no program; preparing again asks for none.
    func testOpenCLPreparationBuildsEveryProgramAStepLaunches() throws {
        let shared = try OpenCLTestSupport.context()
        let (squeeze, hyper, batch) = try squeezeShapedStep()
        let residual = try TrainingGraph(graph: try NetworkGraph(model: try ResidualFusionTests.model()))
        let residualBatch = try ArrayBatchProvider(examples: (0..<4).map {
            TrainingExample(input: Tensor(shape: [3, 10, 10], uniformIn: 0...255, seed: UInt64($0)), target: .classIndex($0 % 3))
        }).batch(at: 0..<4)
        for (training, batch) in [(squeeze, batch), (residual, residualBatch)] {
            let context = try OpenCLContext(device: shared.device)
            let executor = try Executor(training: training, optimizer: .sgd, backend: OpenCLBackend(context: context))
            XCTAssertGreaterThanOrEqual(try executor.prepare(batch: 4), 5)
            let prepared = context.programStatistics.programs
            XCTAssertGreaterThanOrEqual(prepared, 5)
            XCTAssertEqual(try executor.prepare(batch: 4), 0, "prepared twice")
            _ = try executor.trainStep(batch, parameters: hyper)
            XCTAssertEqual(context.programStatistics.programs, prepared, "a prepared step built programs")
        }
    }

    /// Prediction and evaluation prepare too (`InferenceRunner.prepare`): the forward passes' programs
    /// are built before the first pass, so a prepared prediction builds none; a prediction from a
    /// tensor leaves the pixel upload's program out, an evaluation of image batches builds it.
    func testInferencePreparesItsForwardPasses() throws {
        let shared = try OpenCLTestSupport.context()
        let graph = try NetworkGraph(model: try SqueezeShaped.model())
        let input = Tensor(shape: [1, 3, 15, 15], uniformIn: 0...255, seed: 5)
        var counts: [Bool: Int] = [:]
        for pixels in [false, true] {
            let context = try OpenCLContext(device: shared.device)
            let backend = OpenCLBackend(context: context)
            let runner = try InferenceRunner(graph: graph, prefix: backend, tail: backend, fallbacks: [], warn: { XCTFail($0) })
            XCTAssertGreaterThan(runner.prepare(batchSize: 1, pixels: pixels), 0)
            let prepared = context.programStatistics.programs
            XCTAssertGreaterThanOrEqual(prepared, 3, "convolution, pooling and softmax programs at least")
            _ = try runner.run(position: "one input") { try $0.predict(input) }
            XCTAssertEqual(context.programStatistics.programs, prepared, "a prepared prediction built programs")
            counts[pixels] = prepared
        }
        XCTAssertEqual(counts[true], counts[false]! + 1, "the pixel upload's program, only where batches come as pixels")

        // A predictor made by the model's kind prepares on request, unless the run's environment says not to.
        for (environment, prepares) in [([:], true), (["UPDRAFT_PREPARE": "off"], false)] {
            var config = UpdateConfiguration()
            config.placement.computeUnits = .cpuOnly
            config.environment = UpdraftEnvironment(environment)
            let predictor = try ModelKinds.predictor(model: try SqueezeShaped.model(), configuration: config, batchSize: 1,
                                                     warn: { XCTFail($0) })
            XCTAssertEqual(predictor.prepare(batchSize: 1, work: .prediction) > 0, prepares, "\(environment)")
        }
    }

    /// `OpenCLContext.buildPrograms` builds each distinct program once however often it is named, and
    /// threads that ask for a program another is building wait for that build instead of starting theirs.
    func testProgramsBuildTogetherOncePerSourceAndDefines() throws {
        let shared = try OpenCLTestSupport.context()
        let context = try OpenCLContext(device: shared.device)
        context.binaryCache = nil
        let table = ActivationKind.openCLDefines
        let a = (file: "activation.cl", defines: table.merging(["WG_SIZE": "64"]) { $1 })
        let b = (file: "activation.cl", defines: table.merging(["WG_SIZE": "32"]) { $1 })
        XCTAssertEqual(try context.buildPrograms([a, b, a]), 2)
        XCTAssertEqual(context.programStatistics.builtFromSource, 2)
        XCTAssertEqual(try context.buildPrograms([b, a]), 0)
        let c = table.merging(["WG_SIZE": "16"]) { $1 }
        DispatchQueue.concurrentPerform(iterations: 6) { _ in _ = try? context.program(named: "activation.cl", defines: c) }
        XCTAssertEqual(context.programStatistics.builtFromSource, 3, "threads asking for one program built it more than once")
        XCTAssertThrowsError(try context.buildPrograms([(file: "missing.cl", defines: [:])])) { error in
            XCTAssertTrue("\(error)".contains("missing.cl"), "\(error)")
        }
    }
}
