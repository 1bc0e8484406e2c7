// Concat along channels (Kernels/concat.cl): per input, one blocked copy between its [N, C_i, S] tensor
// and its channel slice of the [N, C, S] output.
import UpdraftCore

extension OpenCLBackend {
    /// One blocked copy (concat.cl) per input into its channel slice of the output.
    public func concatForward(_ inputs: [DeviceBuffer], channels: [Int], batch: Int, spatial: Int,
                              output: DeviceBuffer) throws {
        let total = try validateConcat(inputs.count, channels: channels, batch: batch, spatial: spatial, op: "concat")
        let y = try operand(output, holds: batch * total * spatial, "concat output")
        var c0 = 0
        for (i, input) in inputs.enumerated() {
            let block = channels[i] * spatial
            let x = try operand(input, holds: batch * block, "concat input \(i)")
            try copyBlocks(from: x, stride: block, offset: 0, to: y, stride: total * spatial, offset: c0 * spatial,
                           blockLength: block, blocks: batch)
            c0 += channels[i]
        }
    }

    /// One blocked copy per input out of its channel slice of the output gradient (overwrites, no accumulation).
    public func concatBackward(_ outputGradient: DeviceBuffer, channels: [Int], batch: Int, spatial: Int,
                               inputGradients: [DeviceBuffer]) throws {
        let total = try validateConcat(inputGradients.count, channels: channels, batch: batch, spatial: spatial,
                                       op: "concat backward")
        let dy = try operand(outputGradient, holds: batch * total * spatial, "concat output gradient")
        var c0 = 0
        for (i, gradient) in inputGradients.enumerated() {
            let block = channels[i] * spatial
            let dx = try operand(gradient, holds: batch * block, "concat input gradient \(i)")
            try copyBlocks(from: dy, stride: total * spatial, offset: c0 * spatial, to: dx, stride: block, offset: 0,
                           blockLength: block, blocks: batch)
            c0 += channels[i]
        }
    }

    /// Copies `blocks` blocks of `blockLength` floats, block b from src[b*srcStride + srcOffset ...]
    /// to dst[b*dstStride + dstOffset ...].
    private func copyBlocks(from src: OpenCLBuffer, stride srcStride: Int, offset srcOffset: Int,
                            to dst: OpenCLBuffer, stride dstStride: Int, offset dstOffset: Int,
                            blockLength: Int, blocks: Int) throws {
        let count = blockLength * blocks
        guard count > 0 else { return }
        let k = try opsKernel("concat.cl", "copy_blocks")
        try k.setArguments([.buffer(src), .int(srcStride), .int(srcOffset), .buffer(dst), .int(dstStride),
                            .int(dstOffset), .int(blockLength), .int(count)])
        try launchElementwise(k, count: count)
    }

    /// Checks the sizes and returns the output's channel count.
    private func validateConcat(_ inputCount: Int, channels: [Int], batch: Int, spatial: Int, op: String) throws -> Int {
        guard inputCount == channels.count else {
            throw UpdraftError(.invalidArgument, "\(name) \(op): \(inputCount) inputs but \(channels.count) channel counts")
        }
        try requireSizes([("batch", batch), ("spatial size", spatial)] + channels.map { ("channel count", $0) },
                         total: 0, op: op)
        let total = channels.reduce(0, +)
        try requireSizes([], total: batch * total * spatial, op: op)
        return total
    }
}
