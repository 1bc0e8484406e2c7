/// Forward and backward of the layout ops (Ops/Layout.swift). Shape re-labelling ops alias their
/// input's buffer in `forward` (they never reach `layoutForward`) and hand the output gradient's
/// buffer to their input in backward: no kernel, no copy. Transpose runs the permuted copy (backward:
/// the inverse permutation); softmaxND and concatND run the softmax and concat kernels on their
/// (outer, axis, inner) geometry, the batch folded into outer.
extension Executor {
    func layoutForward(_ op: LayoutOp, _ layer: GraphLayer, inputs x: [DeviceBuffer], output y: DeviceBuffer,
                       batch: Int, backend: Backend) throws {
        switch op {
        case .alias:
            // `forward` aliases instead; a caller that wants the values in their own buffer gets a copy.
            try backend.copy(x[0], to: y)
        case let .transpose(g, _):
            try backend.transpose(g.withBatch(batch), input: x[0], output: y)
        case .softmaxND:
            try backend.softmaxForward(op.softmaxGeometry(batch: batch)!, input: x[0], output: y)
        case let .concatND(outer, channels, inner):
            try backend.concatForward(x, channels: channels, batch: batch * outer, spatial: inner, output: y)
        }
    }

    func layoutBackward(_ op: LayoutOp, _ layer: GraphLayer, outputGradient dy: DeviceBuffer, wantsInput: [Bool],
                        ws: Workspace) throws {
        let backend = tailBackend
        let n = ws.batch
        func newInputGradient(_ i: Int) throws -> DeviceBuffer {
            try ws.acquire(layer.inputShapes[i].withBatch(n).count, on: backend)
        }
        switch op {
        case .alias:
            guard wantsInput[0] else { return }
            try ws.addGradient(layer.inputs[0], dy, on: backend)
        case let .transpose(g, _):
            guard wantsInput[0] else { return }
            let dx = try newInputGradient(0)
            try backend.transpose(g.withBatch(n).inverse, input: dy, output: dx)
            try ws.addGradient(layer.inputs[0], dx, on: backend)
        case .softmaxND:
            guard wantsInput[0], let y = ws.value(layer.output) else { return }
            let dx = try newInputGradient(0)
            try backend.softmaxBackward(op.softmaxGeometry(batch: n)!, output: y.buffer, outputGradient: dy, inputGradient: dx)
            try ws.addGradient(layer.inputs[0], dx, on: backend)
        case let .concatND(outer, channels, inner):
            guard wantsInput.contains(true) else { return }
            let parts = try layer.inputs.indices.map { try newInputGradient($0) }
            try backend.concatBackward(dy, channels: channels, batch: n * outer, spatial: inner, inputGradients: parts)
            for (i, part) in parts.enumerated() {
                if wantsInput[i] { try ws.addGradient(layer.inputs[i], part, on: backend) } else { ws.release(part, from: backend) }
            }
        }
    }
}
