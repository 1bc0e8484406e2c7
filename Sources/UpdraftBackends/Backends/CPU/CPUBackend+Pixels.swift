// The CPU twin of Kernels/pixels.cl: 8-bit samples straight into the float buffer, the scaler applied
// in the same pass (no float copy of the batch on the way); the loops are CUpdraftKernels'.
import CUpdraftKernels
import UpdraftCore

extension CPUBackend {
    /// y[n, c, s] = scale[c] * Float(x[n, c, s]) + shift[c] (or Float(x)), one (n, c) plane per work item:
    /// the same float expression as `channelAffine`, so the result is bit for bit the float path's.
    public func uploadPixels(_ pixels: UnsafeBufferPointer<UInt8>, shape: Shape, scale: DeviceBuffer?, shift: DeviceBuffer?,
                             to output: DeviceBuffer) throws {
        try checkPixels(pixels, shape: shape, scale: scale, shift: shift, output: output)
        let (C, S) = (shape.c, shape.h * shape.w)
        let count = shape.count
        guard count > 0, let x = pixels.baseAddress else { return }
        let y = try pointer(output, count, "pixel upload output \(shape)")
        let affine = try scale.map { s in
            (try pointer(s, C, "pixel upload scale"), try pointer(shift!, C, "pixel upload shift"))
        }
        parallelChunks(shape.n * C, grain: max(1, CPUParallel.elementGrain / max(1, S))) { planes in
            for p in planes {
                let src = x + p * S, dst = y + p * S
                if let (a, b) = affine {
                    let (sc, sh) = (a[p % C], b[p % C])
                    upd_bytes_to_float_affine(src, dst, S, sc, sh)
                } else {
                    upd_bytes_to_float(src, dst, S)
                }
            }
        }
    }
}
