import UpdraftCore
import UpdraftModel

/// The layout ops (Ops/Layout.swift). Shape re-labelling ops alias their input's buffer in the
/// executor's forward pass (they reach `forward` here only when a caller wants their own buffer: a
/// copy) and hand the output gradient's buffer to their input in backward: no kernel, no copy.
/// Transpose runs the permuted copy (backward: the inverse permutation); softmaxND and concatND run
/// the softmax and concat kernels on their (outer, axis, inner) geometry, the batch folded into outer.
enum LayoutLayer: LayerKind {
    static func forward(_ c: ForwardCall) throws {
        guard case let .layout(op) = c.layer.op else { return }
        let x = c.inputs, y = c.output
        switch op {
        case .alias:
            try c.backend.copy(x[0], to: y)
        case let .transpose(g, _):
            try c.backend.transpose(g.withBatch(c.batch), input: x[0], output: y)
        case .softmaxND:
            try c.backend.softmaxForward(op.softmaxGeometry(batch: c.batch)!, input: x[0], output: y)
        case let .concatND(outer, channels, inner):
            try c.backend.concatForward(x, channels: channels, batch: c.batch * outer, spatial: inner, output: y)
        }
    }

    static func backward(_ c: BackwardCall) throws {
        guard case let .layout(op) = c.layer.op else { return }
        let n = c.batch, dy = c.outputGradient
        switch op {
        case .alias:
            guard c.wantsInput[0] else { return }
            try c.addInputGradient(0, dy)
        case let .transpose(g, _):
            try c.inputGradient { dx in try c.backend.transpose(g.withBatch(n).inverse, input: dy, output: dx) }
        case .softmaxND:
            guard let y = c.output else { return }
            try c.inputGradient { dx in
                try c.backend.softmaxBackward(op.softmaxGeometry(batch: n)!, output: y, outputGradient: dy, inputGradient: dx)
            }
        case let .concatND(outer, channels, inner):
            guard c.wantsInput.contains(true) else { return }
            let parts = try c.layer.inputs.indices.map { try c.newInputGradient($0) }
            try c.backend.concatBackward(dy, channels: channels, batch: n * outer, spatial: inner, inputGradients: parts)
            for (i, part) in parts.enumerated() {
                if c.wantsInput[i] { try c.addInputGradient(i, part) } else { c.ws.release(part, from: c.backend) }
            }
        }
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
