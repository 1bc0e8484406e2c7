import UpdraftCore
import UpdraftBackends
import UpdraftData

/// The executor's training state as host values: what a replica exchanges with the others (the
/// gradients of a step) and what recovery needs to carry training over to another device (the
/// parameters, the optimizer's state and the step count). Frozen parameters are not part of it:
/// they never change, and every executor made from the same `TrainingGraph` starts with them.
/// One trained parameter tensor (a layer's weights or its bias) with its buffers on the tail backend.
struct TrainableTensor {
    var layer: String
    var isBias: Bool
    var parameter: DeviceBuffer
    var slot: Executor.Slot
    var label: String { "\(layer).\(isBias ? "bias" : "weights")" }
}

/// A host copy of everything an optimizer step changes, as of a completed step.
public struct ExecutorState: Sendable {
    /// One trained tensor's values and optimizer state, as Float host arrays of equal length.
    public struct TensorState: Sendable {
        /// "<layer>.weights" or "<layer>.bias".
        public var name: String
        /// The parameter values after the last completed step.
        public var values: [Float]
        /// The optimizer's state, one array per `Optimizer.stateSlots` name, in that order (SGD: velocity; Adam: m, v).
        public var state: [[Float]]
    }
    /// Optimizer steps taken (Adam's bias correction counts them).
    public var stepCount: Int
    /// The trained tensors, in `trainableTensors()` order (updatable layers in graph order, weights then bias).
    public var tensors: [TensorState]

    /// Host memory the copy takes.
    public var byteCount: Int {
        tensors.reduce(0) { $0 + 4 * $1.state.reduce($1.values.count) { $0 + $1.count } }
    }
}

extension Executor {
    /// The trained tensors in a fixed order (updatable layers in graph order, weights then bias): the
    /// order gradients and states are exchanged in, identical on every executor of one graph.
    func trainableTensors() -> [TrainableTensor] {
        var out: [TrainableTensor] = []
        for layer in graph.updatableLayers {
            guard let p = parameters[layer.name] else { continue }
            if let w = p.weights, let slot = weightSlots[layer.name] {
                out.append(TrainableTensor(layer: layer.name, isBias: false, parameter: w, slot: slot))
            }
            if let b = p.bias, let slot = biasSlots[layer.name] {
                out.append(TrainableTensor(layer: layer.name, isBias: true, parameter: b, slot: slot))
            }
        }
        return out
    }

    /// Element counts of the trained tensors, in exchange order.
    public var trainableTensorCounts: [Int] { trainableTensors().map(\.slot.count) }

    /// The gradients now in the gradient buffers (after `computeGradients`), in exchange order.
    public func gradientValues() throws -> [[Float]] {
        try trainableTensors().map { try tailBackend.download($0.slot.gradient) }
    }

    /// Replaces the gradient buffers' contents (e.g. with the gradients combined over replicas).
    public func setGradients(_ gradients: [[Float]]) throws {
        let tensors = trainableTensors()
        guard gradients.count == tensors.count else {
            throw UpdraftError(.invalidArgument, "\(gradients.count) gradient tensors for \(tensors.count) trained tensors")
        }
        for (t, g) in zip(tensors, gradients) {
            guard g.count == t.slot.count else {
                throw UpdraftError(.invalidArgument, "the gradient of \(t.label) has \(g.count) values, expected \(t.slot.count)")
            }
            try tailBackend.upload(g, to: t.slot.gradient)
        }
    }

    /// Reads the parameters, optimizer state and step count back to the host. Throws if an optimizer pass
    /// failed part-way (`isMidUpdate`): that state belongs to no step.
    public func captureState() throws -> ExecutorState {
        guard !isMidUpdate else {
            throw UpdraftError(.device, "\(deviceName) failed part-way through an optimizer update; its state belongs to no step")
        }
        let tensors = try trainableTensors().map { t in
            ExecutorState.TensorState(name: t.label, values: try tailBackend.download(t.parameter),
                                      state: try t.slot.state.map { try tailBackend.download($0) })
        }
        return ExecutorState(stepCount: stepCount, tensors: tensors)
    }

    /// Uploads a state captured from an executor of the same graph and optimizer.
    public func restoreState(_ state: ExecutorState) throws {
        let tensors = trainableTensors()
        guard state.tensors.map(\.name) == tensors.map(\.label) else {
            throw UpdraftError(.invalidArgument, "the state holds \(state.tensors.map(\.name)), this executor trains \(tensors.map(\.label))")
        }
        for (t, s) in zip(tensors, state.tensors) {
            guard s.values.count == t.slot.count, s.state.count == t.slot.state.count,
                  s.state.allSatisfy({ $0.count == t.slot.count }) else {
                throw UpdraftError(.invalidArgument, "the state of \(s.name) does not match its shape or optimizer")
            }
            try tailBackend.upload(s.values, to: t.parameter)
            for (values, buffer) in zip(s.state, t.slot.state) { try tailBackend.upload(values, to: buffer) }
        }
        stepCount = state.stepCount
        isMidUpdate = false
    }
}
