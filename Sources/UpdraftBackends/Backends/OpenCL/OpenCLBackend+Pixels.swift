import COpenCL
import Foundation
import UpdraftCore

// Image batches as bytes (Kernels/pixels.cl): the samples are written into a device staging buffer
// reused from batch to batch (a quarter of the float32 bytes cross the bus), then one kernel writes
// the float input with the model's scaler applied.
extension OpenCLBackend {
    /// A blocking write of the bytes into the staging buffer (in the in-order queue, after whatever
    /// read it before), then `pixels_to_float` or `pixels_to_float_affine`, queued.
    public func uploadPixels(_ pixels: UnsafeBufferPointer<UInt8>, shape: Shape, scale: DeviceBuffer?, shift: DeviceBuffer?,
                             to output: DeviceBuffer) throws {
        try checkPixels(pixels, shape: shape, scale: scale, shift: shift, output: output)
        let count = shape.count
        try requireSizes([], total: count, op: "pixel upload")
        guard count > 0, let base = pixels.baseAddress else { return }
        let y = try operand(output, holds: count, "pixel upload output \(shape)")
        let staging = try pixelStaging.buffer(bytes: count, context: context)
        try clCheck(clEnqueueWriteBuffer(context.queue, staging.mem, cl_bool(CL_TRUE), 0, count, base, 0, nil, nil),
                    "clEnqueueWriteBuffer", "uploading \(count) pixel bytes")
        let k: OpenCLKernel
        if let scale, let shift {
            let s = try operand(scale, holds: shape.c, "pixel upload scale")
            let t = try operand(shift, holds: shape.c, "pixel upload shift")
            k = try opsKernel("pixels.cl", "pixels_to_float_affine")
            try k.setArguments([.buffer(staging), .buffer(s), .buffer(t), .buffer(y), .int(shape.c),
                                .int(max(1, shape.h * shape.w)), .int(count)])
        } else {
            k = try opsKernel("pixels.cl", "pixels_to_float")
            try k.setArguments([.buffer(staging), .buffer(y), .int(count)])
        }
        try launchElementwise(k, count: count)
    }
}

/// The byte staging buffer of `OpenCLBackend.uploadPixels`: grown when a batch needs more, else reused.
final class OpenCLPixelStaging: @unchecked Sendable {
    private let lock = NSLock()
    private var staging: OpenCLBuffer?

    /// A buffer of at least `bytes` bytes (a float buffer of ceil(bytes / 4) values).
    func buffer(bytes: Int, context: OpenCLContext) throws -> OpenCLBuffer {
        lock.lock(); defer { lock.unlock() }
        let floats = (bytes + 3) / 4
        if let s = staging, s.count >= floats, s.context === context { return s }
        staging = nil
        let made = try OpenCLBuffer(context: context, count: floats)
        staging = made
        return made
    }
}
