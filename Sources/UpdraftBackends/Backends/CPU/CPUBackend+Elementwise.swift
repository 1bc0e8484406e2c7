import Foundation
import UpdraftCore

// Element-wise add/multiply, concat and the frozen channel affine: streaming loops over raw pointers
// (four-lane SIMD through `CPUKernels.map`, or loops the compiler vectorises), split into contiguous
// chunks over threads when large (activations: CPUBackend+Activation.swift).
// In-place calls (output == input) are fine: every element is read before it is written.
extension CPUBackend {
    private func requireCount(_ count: Int, _ op: String) throws {
        try requireSizes(["element count": count], op: op)
    }

    /// Four-lane SIMD loop split into chunks over threads; in place is allowed.
    public func elementwise(_ op: ElementwiseOp, _ a: DeviceBuffer, _ b: DeviceBuffer, output: DeviceBuffer, count: Int) throws {
        try requireCount(count, "element-wise \(op)")
        let pa = try pointer(a, count, "element-wise first operand")
        let pb = try pointer(b, count, "element-wise second operand")
        let y = try pointer(output, count, "element-wise output")
        parallelChunks(count, grain: CPUParallel.elementGrain) { r in
            switch op {
            case .add: CPUKernels.map(r, pa, pb, into: y, +)
            case .multiply: CPUKernels.map(r, pa, pb, into: y, *)
            }
        }
    }

    // MARK: Concat — input i [N, channels[i], S] -> output [N, sum(channels), S]

    private func requireConcat(_ inputCount: Int, channels: [Int], batch: Int, spatial: Int) throws {
        guard inputCount == channels.count else {
            throw UpdraftError(.invalidArgument, "\(name) concat got \(inputCount) inputs but \(channels.count) channel counts")
        }
        try requireSizes(["batch": batch, "spatial size": spatial], op: "concat")
        for c in channels where c < 0 {
            throw UpdraftError(.invalidArgument, "\(name) concat: channel count \(c) must be at least 0")
        }
    }

    /// Copies, for every image n and part i, the block of channels[i] * S floats between the part's
    /// buffer and its slot in the concatenated one (`toParts` picks the direction).
    private func concatCopy(parts: [UnsafeMutablePointer<Float>], whole: UnsafeMutablePointer<Float>, channels: [Int],
                            batch N: Int, spatial S: Int, toParts: Bool) {
        let C = channels.reduce(0, +)
        var offsets: [Int] = [], c0 = 0
        for ci in channels { offsets.append(c0); c0 += ci }
        parallelChunks(N, grain: max(1, CPUParallel.copyGrain / max(1, C * S))) { images in
            for n in images {
                for (i, part) in parts.enumerated() {
                    let block = channels[i] * S
                    let slot = whole + (n * C + offsets[i]) * S, piece = part + n * block
                    if toParts { piece.update(from: slot, count: block) } else { slot.update(from: piece, count: block) }
                }
            }
        }
    }

    /// One block copy of channels[i] * spatial floats per image and input, images split over threads.
    public func concatForward(_ inputs: [DeviceBuffer], channels: [Int], batch: Int, spatial: Int, output: DeviceBuffer) throws {
        try requireConcat(inputs.count, channels: channels, batch: batch, spatial: spatial)
        let xs = try inputs.enumerated().map { i, b in try pointer(b, batch * channels[i] * spatial, "concat input \(i)") }
        let y = try pointer(output, batch * channels.reduce(0, +) * spatial, "concat output")
        concatCopy(parts: xs, whole: y, channels: channels, batch: batch, spatial: spatial, toParts: false)
    }

    /// Copies each input's channel block of the output gradient back to its gradient buffer (overwrites, no accumulation).
    public func concatBackward(_ outputGradient: DeviceBuffer, channels: [Int], batch: Int, spatial: Int,
                               inputGradients: [DeviceBuffer]) throws {
        try requireConcat(inputGradients.count, channels: channels, batch: batch, spatial: spatial)
        let dy = try pointer(outputGradient, batch * channels.reduce(0, +) * spatial, "concat output gradient")
        let dxs = try inputGradients.enumerated().map { i, b in
            try pointer(b, batch * channels[i] * spatial, "concat input gradient \(i)")
        }
        concatCopy(parts: dxs, whole: dy, channels: channels, batch: batch, spatial: spatial, toParts: true)
    }

    // MARK: Channel affine — x, y [N, C, S], scale and shift [C]

    private func requireAffine(_ shape: Shape) throws {
        try requireSizes(["batch": shape.n, "channels": shape.c, "height": shape.h, "width": shape.w],
                         op: "channel affine")
    }

    /// y = scale[c] * x + shift[c], one (n, c) plane per work item; in place is allowed.
    public func channelAffine(_ shape: Shape, input: DeviceBuffer, scale: DeviceBuffer, shift: DeviceBuffer,
                              output: DeviceBuffer) throws {
        try affinePlanes(shape, input, "input", scale: scale, shift: shift, output, "output")
    }

    /// dx = scale[c] * dy per plane (scale and shift are frozen, so they get no gradient).
    public func channelAffineBackward(_ shape: Shape, outputGradient: DeviceBuffer, scale: DeviceBuffer,
                                      inputGradient: DeviceBuffer) throws {
        try affinePlanes(shape, outputGradient, "output gradient", scale: scale, shift: nil, inputGradient, "input gradient")
    }

    /// `scale[c] * source (+ shift[c])` into `destination`, one (n, c) plane per work item.
    private func affinePlanes(_ shape: Shape, _ source: DeviceBuffer, _ sourceName: String, scale: DeviceBuffer,
                              shift: DeviceBuffer?, _ destination: DeviceBuffer, _ destinationName: String) throws {
        try requireAffine(shape)
        let (C, S) = (shape.c, shape.h * shape.w)
        let count = shape.n * C * S
        let x = try pointer(source, count, "channel affine \(sourceName) \(shape)")
        let a = try pointer(scale, C, "channel affine scale")
        let b = try shift.map { try pointer($0, C, "channel affine shift") }
        let y = try pointer(destination, count, "channel affine \(destinationName)")
        parallelChunks(shape.n * C, grain: max(1, CPUParallel.elementGrain / max(1, S))) { planes in
            for p in planes {
                let sc = a[p % C]
                let src = x + p * S, dst = y + p * S
                if let b {
                    let sh = b[p % C]
                    for s in 0..<S { dst[s] = sc * src[s] + sh }
                } else {
                    for s in 0..<S { dst[s] = sc * src[s] }
                }
            }
        }
    }
}
