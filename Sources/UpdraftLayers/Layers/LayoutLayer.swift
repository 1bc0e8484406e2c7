import UpdraftCore
import UpdraftBackends
import UpdraftModel

/// The layout ops (Ops/Layout.swift). Shape re-labelling ops alias their input's buffer in the
/// executor's forward pass (they reach `forward` here only when a caller wants their own buffer: a
/// copy) and hand the output gradient's buffer to their input in backward: no kernel, no copy.
/// The others run as their op says (`LayoutOp.execution`, composed by `Backend.layoutForward` /
/// `layoutBackward`): softmaxND on the softmax kernels, the ops that move values (transpose,
/// concatND, …) as strided copies, backward the copies reversed. A new layout op needs nothing here.
enum LayoutLayer: LayerKind {
    static func kernelFamilies(_ op: LayerOp) -> [KernelFamily] { [.layout] }
    /// An alias renames the blob; every other layout op moves values between images' positions.
    static func computesEachImageAlone(_ op: LayerOp) -> Bool { if case .layout(.alias) = op { return true } else { return false } }

    static func forward(_ c: ForwardCall) throws {
        guard case let .layout(op) = c.layer.op else { return }
        try c.backend.layoutForward(op, batch: c.batch, inputs: c.inputs, output: c.output)
    }

    static func backward(_ c: BackwardCall) throws {
        guard case let .layout(op) = c.layer.op else { return }
        let dy = c.outputGradient
        if op.isAlias {
            guard c.wantsInput[0] else { return }
            return try c.addInputGradient(0, dy)
        }
        guard c.wantsInput.contains(true) else { return }
        let output: DeviceBuffer?
        if case .softmax = op.execution(batch: c.batch) {
            guard let y = c.output else { return }
            output = y
        } else {
            output = nil
        }
        let parts = try c.layer.inputs.indices.map { c.wantsInput[$0] ? try c.newInputGradient($0) : nil }
        try c.backend.layoutBackward(op, batch: c.batch, output: output, outputGradient: dy, inputGradients: parts)
        for (i, part) in parts.enumerated() { if let part { try c.addInputGradient(i, part) } }
    }

    static func work(_ layer: GraphLayer, batch: Int, optimizer: OptimizerKind,
                     backwardData: Bool, backwardWeights: Bool) throws -> LayerWork {
        var w = LayerWork()
        guard case let .layout(l) = layer.op else { return w }
        let count = layer.outputShape.withBatch(batch).count
        w.forward = l.isAlias ? [] : [KernelWork(l.forwardCost(count: count))]
        if backwardData && !l.isAlias { w.backwardData = [KernelWork(l.backwardCost(count: count))] }
        return w
    }
}
