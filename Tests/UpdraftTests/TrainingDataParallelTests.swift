import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftLayers
@testable import UpdraftData
@testable import UpdraftTraining

/// Data-parallel training: slices of each mini-batch on several replicas, gradients combined on the
/// host, one identical update on each, equal to one device's training within float tolerance.
final class TrainingDataParallelTests: XCTestCase {
    // MARK: Pieces

    func testSliceSizesFollowTheSharesAndAddUp() {
        XCTAssertEqual(DataParallelism.sliceSizes(count: 10, shares: [1, 1, 1]), [4, 3, 3])
        XCTAssertEqual(DataParallelism.sliceSizes(count: 8, shares: [3, 1]), [6, 2])
        XCTAssertEqual(DataParallelism.sliceSizes(count: 7, shares: [2, 1, 1]), [3, 2, 2], "3.5, 1.75, 1.75: the larger remainders get the rest")
        XCTAssertEqual(DataParallelism.sliceSizes(count: 1, shares: [1, 1, 1]), [1, 0, 0])
        XCTAssertEqual(DataParallelism.sliceSizes(count: 5, shares: [0, .nan, 1]), [0, 0, 5])
        XCTAssertEqual(DataParallelism.sliceSizes(count: 4, shares: [0, 0]), [2, 2], "no usable share: equal slices")
        for count in 1...20 {
            XCTAssertEqual(DataParallelism.sliceSizes(count: count, shares: [0.3, 1.7, 1]).reduce(0, +), count)
        }
        XCTAssertEqual(DataParallelism.ranges([2, 0, 3]), [0..<2, 2..<2, 2..<5])
    }

    /// The gradient of the whole batch's mean loss is the slices' gradients weighted by slice size,
    /// for cross-entropy and for mean squared error.
    func testCombinedSliceGradientsEqualTheWholeBatchGradient() throws {
        let (golden, model) = try GoldenRun.load("branches_sgd")
        let mse = try CoreMLModel(contentsOf: Fixtures.url("mse_regressor.mlmodel"))
        var rng = SplitMix64(seed: 5)
        let regression = (0..<5).map { _ in
            TrainingExample(input: Tensor(shape: Shape([3]), data: (0..<3).map { _ in rng.nextFloat(in: -1...1) }),
                            target: .values(Tensor(shape: Shape([2]), data: (0..<2).map { _ in rng.nextFloat(in: -1...1) })))
        }
        for (model, examples, sizes) in [(model, Array(golden.examples.prefix(4)), [1, 3]), (mse, regression, [2, 0, 3])] {
            let training = try TrainingGraph(graph: try NetworkGraph(model: model))
            let data = try ArrayBatchProvider(examples: examples)
            let whole = try Executor(training: training, optimizer: .sgd, backend: ReferenceBackend())
            let full = try whole.computeGradients(try data.batch(at: 0..<examples.count))
            var parts: [[[Float]]] = [], results: [Executor.BatchResult] = [], weights: [Double] = []
            for range in DataParallelism.ranges(sizes) where !range.isEmpty {
                let replica = try Executor(training: training, optimizer: .sgd, backend: ReferenceBackend())
                results.append(try replica.computeGradients(try data.batch(at: range)))
                parts.append(try replica.gradientValues())
                weights.append(Double(range.count) / Double(examples.count))
            }
            let combined = try DataParallelism.combine(parts, weights: weights)
            let expected = try whole.gradientValues()
            XCTAssertEqual(combined.map(\.count), expected.map(\.count))
            for (c, e) in zip(combined.joined(), expected.joined()) { XCTAssertEqual(c, e, accuracy: 1e-6) }
            XCTAssertGreaterThan(expected.joined().map(abs).max() ?? 0, 1e-4, "the test needs gradients that are not zero")
            let loss = DataParallelism.combine(results)
            XCTAssertEqual(loss.loss, full.loss, accuracy: 1e-6)
            XCTAssertEqual(loss.correct, full.correct)
            XCTAssertEqual(loss.count, full.count)
        }
    }

    /// An executor's state read back and uploaded into another executor (on another backend) makes
    /// the same next step.
    func testStateCarriesOverToAnotherExecutor() throws {
        let (golden, model) = try GoldenRun.load("branches_adam")
        let training = try TrainingGraph(graph: try NetworkGraph(model: model))
        let hyper = try TrainingParameters(optimizer: .adam, hyperparameters: training.graph.hyperparameters)
        let data = try ArrayBatchProvider(examples: golden.examples)
        let a = try Executor(training: training, optimizer: .adam, backend: CPUBackend())
        _ = try a.trainStep(try data.batch(at: 0..<4), parameters: hyper)
        let state = try a.captureState()
        XCTAssertEqual(state.stepCount, 1)
        XCTAssertEqual(state.tensors.map(\.name), ["conv2a.weights", "conv2a.bias", "conv2b.weights", "conv2b.bias", "fc.weights", "fc.bias"])
        XCTAssertEqual(state.byteCount, 3 * 4 * (15 + 111 + 28), "parameters, m and v of the trained tensors only")
        let b = try Executor(training: training, optimizer: .adam, backend: ReferenceBackend())
        try b.restoreState(state)
        let ra = try a.trainStep(try data.batch(at: 4..<8), parameters: hyper)
        let rb = try b.trainStep(try data.batch(at: 4..<8), parameters: hyper)
        XCTAssertEqual(ra.loss, rb.loss, accuracy: 1e-6)
        for layer in ["conv2a", "conv2b", "fc"] {
            let (wa, ba) = try a.weights(ofLayer: layer), (wb, bb) = try b.weights(ofLayer: layer)
            for (x, y) in zip(wa.data + ba!.data, wb.data + bb!.data) { XCTAssertEqual(x, y, accuracy: 1e-6) }
        }
        // A state from another graph is refused, not half-applied.
        let other = try Executor(training: try TrainingGraph(graph: try NetworkGraph(model: try SqueezeShaped.model())),
                                 optimizer: .adam, backend: ReferenceBackend())
        XCTAssertThrowsError(try other.restoreState(state))
    }

    // MARK: Whole runs

    /// PyTorch's golden SGD and Adam runs, with each batch of 4 split over a CPU and a reference
    /// replica, with and without the feature cache: the same losses and weights as one device.
    func testGoldenRunsOnTwoReplicasEqualOneDevice() throws {
        for name in ["branches_sgd", "branches_adam"] {
            let (golden, model) = try GoldenRun.load(name)
            let data = try ArrayBatchProvider(examples: golden.examples)
            let single = try TrainingRun.train(model, data)
            for (i, loss) in single.losses.enumerated() { XCTAssertEqual(loss, golden.losses[i], accuracy: 1e-5) }
            for cache in [true, false] {
                let parallel = try TrainingRun.train(model, data) {
                    $0.placement.dataParallel = DataParallelism(replicas: [CPUBackend(), ReferenceBackend()])
                    $0.featureCache.enabled = cache
                }
                assertSameTraining(parallel, single, "\(name), feature cache \(cache)")
                XCTAssertEqual(parallel.warnings, [])
                XCTAssertEqual(parallel.epochs.last?.device, "cpu + reference (data parallel)")
                XCTAssertEqual(parallel.epochs.map(\.trainingAccuracy), single.epochs.map(\.trainingAccuracy),
                               "correct counts add up exactly")
                for (layer, expected) in golden.final {
                    let w = try XCTUnwrap(parallel.weights[layer])
                    for (a, b) in zip(w.weights + (w.bias ?? []), expected.weights + expected.bias) { XCTAssertEqual(a, b, accuracy: 2e-5) }
                }
            }
        }
    }

    /// Three replicas with uneven shares (one of them gets a slice of one), validation on the
    /// primary, a short last batch: still one device's result.
    func testThreeReplicasWithUnevenSharesEqualOneDevice() throws {
        let model = try SqueezeShaped.model(batch: 4)
        let data = try SqueezeShaped.data(count: 10)
        let validation = try SqueezeShaped.data(count: 5, seed: 99)
        let single = try TrainingRun.train(model, data) { $0.data.validationData = validation; $0.data.shortLastBatch = true }
        let parallel = try TrainingRun.train(model, data) {
            $0.data.validationData = validation
            $0.data.shortLastBatch = true
            $0.placement.dataParallel = DataParallelism(replicas: [CPUBackend(), ReferenceBackend(), CPUBackend()], shares: [2, 1, 1])
        }
        assertSameTraining(parallel, single, "three replicas")
        XCTAssertEqual(single.losses.count, 6, "3 batches (4, 4, 2) per epoch, 2 epochs")
        for (p, s) in zip(parallel.epochs, single.epochs) {
            XCTAssertEqual(p.validationLoss!, s.validationLoss!, accuracy: 1e-5)
            XCTAssertEqual(p.meanLoss!, s.meanLoss!, accuracy: 1e-5)
        }
    }

    /// The SqueezeNet-shaped model with Adam on two CPU replicas (run at the same time).
    func testSqueezeShapedAdamOnTwoReplicasEqualsOneDevice() throws {
        let model = try SqueezeShaped.model(optimizer: .adam, batch: 6)
        let data = try SqueezeShaped.data(count: 12)
        let single = try TrainingRun.train(model, data) { $0.placement.backends = (CPUBackend(), CPUBackend()) }
        let parallel = try TrainingRun.train(model, data) {
            $0.placement.dataParallel = DataParallelism(replicas: [CPUBackend(), CPUBackend()])
            $0.featureCache.enabled = false
        }
        assertSameTraining(parallel, single, "squeeze-shaped Adam")
        XCTAssertEqual(parallel.losses.count, 4)
    }

    func testOneReplicaIsPlainTraining() throws {
        let (golden, model) = try GoldenRun.load("branches_sgd")
        let data = try ArrayBatchProvider(examples: golden.examples)
        let run = try TrainingRun.train(model, data) { $0.placement.dataParallel = DataParallelism(replicas: [CPUBackend()]) }
        assertSameTraining(run, try TrainingRun.train(model, data), "one replica")
        XCTAssertEqual(run.epochs.last?.device, "cpu")
    }

    func testBadSharesAreRefused() throws {
        let (golden, model) = try GoldenRun.load("branches_sgd")
        let run = try TrainingRun.train(model, try ArrayBatchProvider(examples: golden.examples)) {
            $0.placement.dataParallel = DataParallelism(replicas: [CPUBackend(), CPUBackend()], shares: [1])
        }
        XCTAssertEqual(run.state, .failed)
        XCTAssertTrue("\(run.error!)".contains("share"), "\(run.error!)")
    }

    // MARK: OpenCL devices as separate devices

    /// Two OpenCL backends on two contexts of the same device (PoCL in CI) act as two devices; alone,
    /// together, and mixed with the CPU backend they train the golden model and the SqueezeNet-shaped
    /// one to one device's result. No fallback is allowed, so a failing OpenCL op fails the test.
    func testTwoOpenCLContextsTrainLikeOneDevice() throws {
        let device = try OpenCLTestSupport.context().device
        let (golden, model) = try GoldenRun.load("branches_sgd")
        let data = try ArrayBatchProvider(examples: golden.examples)
        let reference = try TrainingRun.train(model, data)
        // Two contexts, each building its kernels once and serving every run below in turn.
        let a = try OpenCLBackend(device: device), b = try OpenCLBackend(device: device)
        XCTAssertFalse(a.context === b.context)
        let one = try TrainingRun.train(model, data) { $0.placement.backends = (a, a); $0.placement.fallbacks = [] }
        if let e = one.error, "\(e)".contains("not implemented on OpenCL yet") {
            throw XCTSkip("convolution is not on OpenCL in this build: \(e)")
        }
        assertSameTraining(one, reference, tolerance: 1e-4, "one OpenCL context")
        let two = try TrainingRun.train(model, data) { $0.placement.dataParallel = DataParallelism(replicas: [a, b]); $0.placement.fallbacks = [] }
        assertSameTraining(two, one, tolerance: 1e-4, "two OpenCL contexts")
        XCTAssertEqual(two.warnings, [])
        let mixed = try TrainingRun.train(model, data) {
            $0.placement.dataParallel = DataParallelism(replicas: [b, CPUBackend()], shares: [1, 3])
            $0.placement.fallbacks = []
        }
        assertSameTraining(mixed, reference, tolerance: 1e-4, "OpenCL + CPU")

        let squeeze = try SqueezeShaped.model(batch: 6)
        let squeezeData = try SqueezeShaped.data(count: 12)
        let squeezeOne = try TrainingRun.train(squeeze, squeezeData) { $0.placement.backends = (CPUBackend(), CPUBackend()) }
        let squeezeTwo = try TrainingRun.train(squeeze, squeezeData) {
            $0.placement.dataParallel = DataParallelism(replicas: [a, b])
            $0.placement.fallbacks = []
        }
        assertSameTraining(squeezeTwo, squeezeOne, tolerance: 1e-4, "squeeze-shaped on two OpenCL contexts")
    }
}
