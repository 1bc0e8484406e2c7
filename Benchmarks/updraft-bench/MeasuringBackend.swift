import Foundation
import Updraft

/// A `Backend` that forwards every call to another one and measures: the peak number of bytes held
/// in buffers made through `makeBuffer` (parameters, optimizer state, activations, gradients: what
/// the executor allocates), and, when `timing` is on, the wall time of each op by kind and shape.
/// Buffers are the wrapped backend's own, so its ops accept them unchanged. Scratch memory a backend
/// allocates inside an op (im2col, GEMM packing) is not seen here. `ForwardingBackend` passes every
/// requirement through `intercept`, so no op escapes the measurement.
///
/// A buffer counts as live until it is freed: the wrapper holds it weakly and re-adds the live ones
/// whenever a new buffer is made, so the peak is exact at allocation points, where it can only rise.
/// Timing waits for each op to finish (`synchronize`), which costs queued backends their overlap:
/// use it to see where time goes, not for throughput.
final class MeasuringBackend: ForwardingBackend {
    private struct Entry { weak var buffer: DeviceBuffer?; let bytes: Int }
    private var entries: [Entry] = []
    private(set) var peakBytes = 0
    private(set) var allocations = 0

    /// Time each op (see the type's note).
    var timing = false
    /// Seconds and calls per op key since the last `takeOpTimes()`.
    private var opTimes: [String: OpTime] = [:]

    struct OpTime: Codable { var seconds: Double; var calls: Int }

    /// Bytes sent from the host (float uploads and 8-bit pixel uploads) since the last `takeUploadedBytes()`.
    private var uploadedBytes = 0

    /// The bytes uploaded so far, and a fresh start.
    func takeUploadedBytes() -> Int {
        defer { uploadedBytes = 0 }
        return uploadedBytes
    }

    override func upload(_ values: [Float], to buffer: DeviceBuffer) throws {
        uploadedBytes += values.count * MemoryLayout<Float>.size
        try super.upload(values, to: buffer)
    }

    override func upload(_ values: [Float], to buffer: DeviceBuffer, offset: Int) throws {
        uploadedBytes += values.count * MemoryLayout<Float>.size
        try super.upload(values, to: buffer, offset: offset)
    }

    override func uploadPixels(_ pixels: UnsafeBufferPointer<UInt8>, shape: Shape, scale: DeviceBuffer?, shift: DeviceBuffer?,
                               to output: DeviceBuffer) throws {
        uploadedBytes += pixels.count
        try super.uploadPixels(pixels, shape: shape, scale: scale, shift: shift, to: output)
    }

    /// Bytes in buffers still alive now.
    var liveBytes: Int { entries.reduce(0) { $0 + ($1.buffer == nil ? 0 : $1.bytes) } }

    /// The op times gathered so far, and a fresh start.
    func takeOpTimes() -> [String: OpTime] {
        defer { opTimes = [:] }
        return opTimes
    }

    override func intercept<T>(_ call: BackendCall, _ body: () throws -> T) throws -> T {
        if call.kind == .makeBuffer {
            let result = try body()
            if let b = result as? DeviceBuffer {
                allocations += 1
                entries.removeAll { $0.buffer == nil }
                entries.append(Entry(buffer: b, bytes: b.count * MemoryLayout<Float>.size))
                peakBytes = max(peakBytes, liveBytes)
            }
            return result
        }
        guard timing, call.kind != .synchronize else { return try body() }
        let start = DispatchTime.now().uptimeNanoseconds
        let result = try body()
        try inner.synchronize()
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        let detail = call.detail
        let key = detail.isEmpty ? call.kind.rawValue : "\(call.kind.rawValue) \(detail)"
        opTimes[key, default: OpTime(seconds: 0, calls: 0)].seconds += seconds
        opTimes[key, default: OpTime(seconds: 0, calls: 0)].calls += 1
        return result
    }
}
