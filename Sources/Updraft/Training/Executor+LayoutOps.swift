/// Forward and backward of the layout ops (Ops/Layout.swift). Shape re-labelling ops alias their
/// input's buffer in `forward` (they never reach `layoutForward`) and hand the output gradient's
/// buffer to their input in backward: no kernel, no copy.
extension Executor {
    func layoutForward(_ op: LayoutOp, _ layer: GraphLayer, inputs x: [DeviceBuffer], output y: DeviceBuffer,
                       batch: Int, backend: Backend) throws {
        switch op {
        case .alias:
            // `forward` aliases instead; a caller that wants the values in their own buffer gets a copy.
            try backend.copy(x[0], to: y)
        }
    }

    func layoutBackward(_ op: LayoutOp, _ layer: GraphLayer, outputGradient dy: DeviceBuffer, wantsInput: [Bool],
                        ws: Workspace) throws {
        let backend = tailBackend
        switch op {
        case .alias:
            guard wantsInput[0] else { return }
            try ws.addGradient(layer.inputs[0], dy, on: backend)
        }
    }
}
