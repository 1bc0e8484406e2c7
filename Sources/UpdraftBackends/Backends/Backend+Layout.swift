// The layout ops on any backend: each op's forward and backward composed from the backend's ops
// (LayoutOp.execution: the input itself, the softmax kernels, or strided copies after an optional
// fill), and the permuted copy as one strided copy (`DeviceOps.StridedCopyOp`, which CPUBackend,
// ReferenceBackend and OpenCLBackend each implement).
import UpdraftCore

public extension Backend {
    /// Permuted copy of `g.batch` examples (transpose / permute): y's axis k is x's axis g.perm[k].
    func transpose(_ g: TransposeGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try g.validate("\(name) transpose")
        try stridedCopy(g.stridedCopy, from: input, to: output)
    }

    /// The forward pass of a layout op for `batch` examples: the input copied (an alias asked for a
    /// buffer of its own), the softmax, or the op's fill and strided copies.
    func layoutForward(_ op: LayoutOp, batch: Int, inputs: [DeviceBuffer], output: DeviceBuffer) throws {
        switch op.execution(batch: batch) {
        case .alias:
            try copy(inputs[0], to: output)
        case let .softmax(g):
            try softmaxForward(g, input: inputs[0], output: output)
        case let .copies(c):
            guard inputs.count == c.parts.count else {
                throw UpdraftError(.invalidArgument, "\(name) \(op.name): \(inputs.count) inputs for \(c.parts.count) copies")
            }
            if let value = c.fill { try fill(output, with: value) }
            for (part, x) in zip(c.parts, inputs) { try stridedCopy(part, from: x, to: output) }
        }
    }

    /// The input gradients of a layout op for `batch` examples, written (not added) into each
    /// non-nil `inputGradients[i]`: dy itself (alias), the softmax's (which reads the forward
    /// `output`), or each input's view of dy (the copies reversed).
    func layoutBackward(_ op: LayoutOp, batch: Int, output: DeviceBuffer?, outputGradient dy: DeviceBuffer,
                        inputGradients: [DeviceBuffer?]) throws {
        switch op.execution(batch: batch) {
        case .alias:
            if let dx = inputGradients[0] { try copy(dy, to: dx) }
        case let .softmax(g):
            guard let dx = inputGradients[0] else { return }
            guard let output else {
                throw UpdraftError(.invalidArgument, "\(name) \(op.name) backward needs the forward output, which was not kept")
            }
            try softmaxBackward(g, output: output, outputGradient: dy, inputGradient: dx)
        case let .copies(c):
            guard inputGradients.count == c.parts.count else {
                throw UpdraftError(.invalidArgument, "\(name) \(op.name) backward: \(inputGradients.count) input gradients for \(c.parts.count) copies")
            }
            for (part, dx) in zip(c.parts, inputGradients) {
                if let dx { try stridedCopy(part.reversed, from: dy, to: dx) }
            }
        }
    }
}
