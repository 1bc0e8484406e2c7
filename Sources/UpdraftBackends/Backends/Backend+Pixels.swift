import UpdraftCore

/// `Backend.uploadPixels`: 8-bit image samples become the network's float input on the backend.
/// Twins: `CPUBackend` (one pass into the buffer), `ReferenceBackend` (Double, the definition),
/// `OpenCLBackend` (Kernels/pixels.cl, the bytes cross to the device and are converted there).
extension Backend {
    /// Through the host: the samples as floats, uploaded, then `channelAffine` in place (what the
    /// executor did before backends had this op). Backends that can should convert in one pass.
    public func uploadPixels(_ pixels: UnsafeBufferPointer<UInt8>, shape: Shape, scale: DeviceBuffer?, shift: DeviceBuffer?,
                             to output: DeviceBuffer) throws {
        try checkPixels(pixels, shape: shape, scale: scale, shift: shift, output: output)
        try upload(pixels.map(Float.init), to: output, offset: 0)
        if let scale, let shift {
            try channelAffine(Shape(n: shape.n, c: shape.c, h: shape.h * shape.w, w: 1), input: output,
                              scale: scale, shift: shift, output: output)
        }
    }

    /// Throws unless `uploadPixels`' arguments agree: `shape.count` samples, an output that holds
    /// them, a 4-D shape, and scale and shift both given (C values each) or both nil.
    func checkPixels(_ pixels: UnsafeBufferPointer<UInt8>, shape: Shape, scale: DeviceBuffer?, shift: DeviceBuffer?,
                     output: DeviceBuffer) throws {
        guard shape.rank == 4, shape.dims.allSatisfy({ $0 >= 0 }) else {
            throw UpdraftError(.invalidArgument, "\(name): uploadPixels needs an [N, C, H, W] shape, got \(shape)")
        }
        guard pixels.count == shape.count else {
            throw UpdraftError(.invalidArgument, "\(name): uploadPixels got \(pixels.count) samples for shape \(shape) (\(shape.count))")
        }
        guard output.count >= shape.count else {
            throw UpdraftError(.invalidArgument, "\(name): uploadPixels output holds \(output.count) values, \(shape) needs \(shape.count)")
        }
        guard (scale == nil) == (shift == nil) else {
            throw UpdraftError(.invalidArgument, "\(name): uploadPixels needs both scale and shift, or neither")
        }
        if let scale, let shift, scale.count < shape.c || shift.count < shape.c {
            throw UpdraftError(.invalidArgument, "\(name): uploadPixels scale (\(scale.count)) and shift (\(shift.count)) need \(shape.c) values, one per channel")
        }
    }
}
