import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftLayers
@testable import UpdraftData
@testable import UpdraftTraining

/// A test-only optimizer, registered nowhere but handed to the executor directly: plain SGD with no
/// state, w -= learningRate * grad, stepped on the host. It shows that a new optimizer is one type
/// that the executor, its state capture and its cost model take without change.
private enum PlainSGD: Optimizer {
    static let name = "plain SGD"
    static let stateSlots: [String] = []
    static var settings: [(key: ParameterKey, defaultValue: ParameterValue)] { [(.learningRate, .double(0.001))] }
    static func hyperparameters(_ values: [ParameterKey: ParameterValue]) -> Float { Float(setting(.learningRate, in: values)) }
    static func step(_ lr: Float, step: Int, on backend: Backend, parameter: DeviceBuffer, gradient: DeviceBuffer,
                     state: [DeviceBuffer], count: Int) throws {
        XCTAssertTrue(state.isEmpty)
        var w = try backend.download(parameter)
        let g = try backend.download(gradient)
        for i in 0..<count { w[i] -= lr * g[i] }
        try backend.upload(w, to: parameter)
    }
    static func referenceStep(_ lr: Float, step: Int, parameter: inout [Double], gradient: [Double], state: inout [[Double]]) throws {
        for i in parameter.indices { parameter[i] -= Double(lr) * gradient[i] }
    }
    static func stepCost(count n: Int) -> OpCost { OpCost(flops: Double(2 * n), bytes: f32Bytes(3 * n)) }
    /// Not a Core ML optimizer: not in `OptimizerKind.optimizerType`, so no model names it.
    static let coreML: CoreMLOptimizerFields? = nil
}

final class OptimizerTests: XCTestCase {
    func goldenTraining() throws -> (TrainingGraph, NetworkGraph, ArrayBatchProvider) {
        let (golden, model) = try GoldenRun.load("branches_sgd")
        let graph = try NetworkGraph(model: model)
        return (try TrainingGraph(graph: graph), graph, try ArrayBatchProvider(examples: golden.examples))
    }

    /// The executor allocates, per trained tensor, one zeroed state buffer per slot the optimizer
    /// declares (SGD: velocity; Adam: m, v), and state capture carries exactly those.
    func testExecutorAllocatesTheDeclaredStateSlots() throws {
        XCTAssertEqual(SGD.stateSlots, ["velocity"])
        XCTAssertEqual(Adam.stateSlots, ["m", "v"])
        let (training, graph, _) = try goldenTraining()
        for (kind, expected) in [(OptimizerKind.sgd, 1), (.adam, 2)] {
            XCTAssertEqual(kind.optimizerType.stateSlots.count, expected)
            let e = try Executor(training: training, optimizer: kind, backend: ReferenceBackend())
            let tensors = e.trainableTensors()
            XCTAssertEqual(tensors.count, graph.updatableLayers.reduce(0) { $0 + ($1.weights != nil ? 1 : 0) + ($1.bias != nil ? 1 : 0) })
            XCTAssertFalse(tensors.isEmpty)
            for t in tensors {
                XCTAssertEqual(t.slot.state.count, expected, "\(kind) \(t.label)")
                for b in t.slot.state { XCTAssertEqual(try e.tailBackend.download(b), [Float](repeating: 0, count: t.slot.count)) }
                XCTAssertEqual(Set(t.slot.state.map { ObjectIdentifier($0) }).count, expected, "distinct buffers")
            }
            let state = try e.captureState()
            XCTAssertEqual(state.tensors.map(\.state.count), [Int](repeating: expected, count: tensors.count))
            XCTAssertEqual(state.byteCount, tensors.reduce(0) { $0 + 4 * $1.slot.count * (1 + expected) })
        }
    }

    /// A third optimizer type runs through the executor untouched: one step gives the reference
    /// formula's weights, its (empty) state is captured and restored, and the cost model prices it.
    func testAnUnregisteredOptimizerRunsThroughTheExecutor() throws {
        let (training, _, provider) = try goldenTraining()
        let e = try Executor(training: training, optimizer: PlainSGD.self, backend: ReferenceBackend())
        XCTAssertTrue(e.trainableTensors().allSatisfy { $0.slot.state.isEmpty })
        let hyper = try TrainingParameters(optimizer: .sgd, hyperparameters: [], overrides: [.learningRate: .double(0.05)])
        let before = try e.captureState()
        _ = try e.computeGradients(try provider.batch(at: 0..<4))
        let gradients = try e.gradientValues()
        try e.applyUpdate(hyper)
        XCTAssertEqual(e.stepCount, 1)
        let after = try e.captureState()
        for ((b, a), g) in zip(zip(before.tensors, after.tensors), gradients) {
            XCTAssertTrue(a.state.isEmpty)
            XCTAssertEqual(a.values, zip(b.values, g).map { $0 - Float(0.05) * $1 }, "\(a.name): w - lr * g")
            var reference = b.values.map(Double.init)
            var none: [[Double]] = []
            try PlainSGD.referenceStep(0.05, step: 1, parameter: &reference, gradient: g.map(Double.init), state: &none)
            for (x, r) in zip(a.values, reference) { XCTAssertEqual(Double(x), r, accuracy: 1e-6) }
        }
        try e.restoreState(before)
        XCTAssertEqual(try e.captureState().tensors.map(\.values), before.tensors.map(\.values))
        XCTAssertEqual(PlainSGD.stepWork(parameterCounts: [10, 0, 3]).count, 2)
    }

    /// The Core ML oneof table: each registered optimizer's field finds its kind again, and a model's
    /// hyperparameters list each optimizer's own fields with the fallbacks its settings declare.
    /// A setting of the other optimizer is refused by name, not silently ignored; the model's own
    /// settings and the run's (batch size, epochs, …) are taken.
    func testAnotherOptimizersSettingIsRefused() throws {
        XCTAssertThrowsError(try TrainingParameters(optimizer: .adam, hyperparameters: [], overrides: [.momentum: .double(0.9)])) {
            let message = "\($0)"
            XCTAssertTrue(message.contains("momentum is a setting of the sgd optimizer"), message)
            XCTAssertTrue(message.contains("beta1"), "the hint lists Adam's settings: \(message)")
        }
        XCTAssertThrowsError(try TrainingParameters(optimizer: .sgd, hyperparameters: [], overrides: [.beta2: .double(0.99)])) {
            XCTAssertTrue("\($0)".contains("beta2 is a setting of the adam optimizer"), "\($0)")
        }
        let adam = try TrainingParameters(optimizer: .adam, hyperparameters: [],
                                          overrides: [.beta1: .double(0.8), .weightDecay: .double(0.01), .epochs: .int(3)])
        XCTAssertEqual(adam[.beta1], .double(0.8))
        XCTAssertEqual(adam.epochs, 3)
        let sgd = try TrainingParameters(optimizer: .sgd, hyperparameters: [], overrides: [.momentum: .double(0.5)])
        XCTAssertEqual(sgd.momentum, 0.5)
    }

    func testCoreMLOptimizerTable() throws {
        XCTAssertEqual(OptimizerKind.coreMLFields, [10, 11])
        for kind in OptimizerKind.all where kind.isInCoreML {
            XCTAssertEqual(OptimizerKind(coreMLField: kind.optimizerType.coreML!.field), kind)
        }
        XCTAssertNil(OptimizerKind(coreMLField: 12))
        var adam = OptimizerSpec.adam(learningRate: 0.01, miniBatchSize: 4)
        adam.beta1 = nil; adam.eps = nil; adam.beta2 = DoubleParameter(defaultValue: 0.99)
        var params = UpdateParameters(optimizer: adam)
        let h = params.hyperparameters
        XCTAssertEqual(h.map(\.key), [.learningRate, .miniBatchSize, .beta1, .beta2, .eps, .shuffle, .seed])
        XCTAssertEqual(h.filter { !$0.inModel }.map(\.key), [.beta1, .eps, .shuffle, .seed])
        XCTAssertEqual(h.map(\.defaultValue), [.double(0.01), .int(4), .double(0.9), .double(0.99), .double(1e-8), .bool(true), .int(0)])
        params.optimizer = .sgd(learningRate: 0.1, miniBatchSize: 2)
        XCTAssertEqual(params.hyperparameters.first { $0.key == .momentum }?.defaultValue, .double(0))
    }

    /// The registered optimizers' steps on a backend match their Double references.
    func testRegisteredStepsMatchTheirReferences() throws {
        // Every optimizer's settings in one table (a run takes only its own optimizer's: momentum is SGD's).
        var values = try TrainingParameters(optimizer: .adam, hyperparameters: [],
                                            overrides: [.learningRate: .double(0.01), .weightDecay: .double(0.01)]).values
        values[.momentum] = .double(0.9)
        for kind in OptimizerKind.all {
            try check(kind.stepType, values)
        }
    }

    private func check<O: Optimizer>(_ o: O.Type, _ values: [ParameterKey: ParameterValue]) throws {
        let backend = CPUBackend()
        let count = 7
        var rng = SplitMix64(seed: 3)
        let w0 = (0..<count).map { _ in Float(rng.nextDouble() * 2 - 1) }
        let g = (0..<count).map { _ in Float(rng.nextDouble() * 2 - 1) }
        let h = O.hyperparameters(values)
        let wb = try backend.makeBuffer(w0), gb = try backend.makeBuffer(g)
        let state = try O.stateSlots.map { _ in try backend.makeBuffer([Float](repeating: 0, count: count)) }
        var w = w0.map(Double.init)
        var s = O.stateSlots.map { _ in [Double](repeating: 0, count: count) }
        for step in 1...3 {
            try O.step(h, step: step, on: backend, parameter: wb, gradient: gb, state: state, count: count)
            try O.referenceStep(h, step: step, parameter: &w, gradient: g.map(Double.init), state: &s)
        }
        for (x, r) in zip(try backend.download(wb), w) { XCTAssertEqual(Double(x), r, accuracy: 1e-5, O.name) }
    }
}
