import CUpdraftKernels
import UpdraftCore

/// Memory that belongs to one backend: a host array for the CPU backends, a `cl_mem` for OpenCL.
/// Buffers hold float32 values; integer data such as class labels is stored as exact floats.
public protocol DeviceBuffer: AnyObject {
    /// Number of float32 elements.
    var count: Int { get }
}

/// An error that says a device could not do the work (a driver's error code, a lost device), not
/// that the work was wrong: training carries on elsewhere. OpenCL's errors conform; so can a custom
/// backend's.
public protocol DeviceFailure: Error {}

/// What a device is, for every place an op can run — the Double reference (the definition), the fast
/// CPU path and each OpenCL device: its buffers, transfers and synchronisation, and `run`, which
/// dispatches a `DeviceOp` to the device's implementation. Shapes travel in the geometry values
/// (`ConvGeometry`, `PoolGeometry`, …); buffers carry only memory. Every op writes (never
/// accumulates into) its outputs, except `accumulate`. Work may be queued: results are guaranteed
/// only after `download` or `synchronize`.
public protocol Backend: AnyObject {
    /// Short name for tables and logs: "reference", "cpu", "opencl:<device name>".
    var name: String { get }
    /// Where the backend's buffers live, for memory budgets (the feature cache). Default: host memory.
    var memory: BackendMemory { get }
    /// Whether the backend computes on the host CPU itself (the CPU backends), so that falling back
    /// to the host CPU would gain nothing. Default: false (OpenCL devices, PoCL included, and wrappers
    /// that do not say).
    var runsOnHostCPU: Bool { get }

    // MARK: Memory
    func makeBuffer(count: Int) throws -> DeviceBuffer
    /// Copies `values` (exactly `buffer.count` of them) into the buffer.
    func upload(_ values: [Float], to buffer: DeviceBuffer) throws
    func download(_ buffer: DeviceBuffer) throws -> [Float]
    func fill(_ buffer: DeviceBuffer, with value: Float) throws
    /// destination[0..<source.count] = source.
    func copy(_ source: DeviceBuffer, to destination: DeviceBuffer) throws
    /// destination += source, element-wise over `source.count` elements.
    func accumulate(_ source: DeviceBuffer, into destination: DeviceBuffer) throws
    /// Waits for all queued work.
    func synchronize() throws
    /// Starts reading `buffer` back without waiting: the values are the buffer's once the work queued
    /// so far has run, and `PendingDownload.values()` waits for them. Lets a step queue its backward
    /// pass before the host waits for the loss. Default: an ordinary download.
    func downloadLater(_ buffer: DeviceBuffer) throws -> PendingDownload
    /// output[n, c, s] = scale[c] * Float(pixels[n, c, s]) + shift[c] over `shape` [N, C, H, W] (or
    /// Float(pixels[…]) when `scale` and `shift` are nil): a batch of 8-bit image samples crosses to
    /// the backend at one byte each and becomes the network's float input there, with the model's
    /// image scaler applied as `channelAffine` applies it. `pixels` holds exactly `shape.count`
    /// samples and may be reused once the call returns. Default: converted and uploaded through the
    /// host, then `channelAffine` (Backend+Pixels.swift).
    func uploadPixels(_ pixels: UnsafeBufferPointer<UInt8>, shape: Shape, scale: DeviceBuffer?, shift: DeviceBuffer?,
                      to output: DeviceBuffer) throws

    // MARK: Ranges and rows (feature-cache gathers and spills; defaults below go through the host)
    /// buffer[offset ..< offset + values.count] = values.
    func upload(_ values: [Float], to buffer: DeviceBuffer, offset: Int) throws
    /// buffer[offset ..< offset + count].
    func download(_ buffer: DeviceBuffer, offset: Int, count: Int) throws -> [Float]
    /// Sees both buffers as rows of `rowLength` floats and copies row `sourceRows[i]` of `source` to
    /// row `destinationRows[i]` of `destination`, for every i. The destination rows are distinct and
    /// `source` and `destination` are different buffers (gathering a batch from a cache arena, or
    /// scattering a batch into one).
    func copyRows(_ source: DeviceBuffer, rows sourceRows: [Int], to destination: DeviceBuffer,
                  rows destinationRows: [Int], rowLength: Int) throws
    /// `copyRows` where one side keeps its rows in half precision (IEEE binary16, two per float of the
    /// buffer; half row r starts at half r * rowLength): `toHalf` rounds float rows of `source` to
    /// nearest-even halves in `destination`, else half rows of `source` become floats. The feature
    /// cache's fp16 storage. Default: through the host.
    func copyRows(_ source: DeviceBuffer, rows sourceRows: [Int], to destination: DeviceBuffer,
                  rows destinationRows: [Int], rowLength: Int, toHalf: Bool) throws

    /// Whether the slice form of `convolutionForward` (`DeviceOps.ConvolutionSliceForward`) runs
    /// natively (the reference goes through the host, and the executor then keeps the concat).
    var writesConvolutionSlices: Bool { get }

    // MARK: Ops
    /// Runs one device op — a convolution, a pooling, an optimizer step, …: `DeviceOp`, whose
    /// `run(on:)` names each backend kind's implementation. Every op goes through here, so a wrapper
    /// intercepts them all in one place (`ForwardingBackend`). The op methods callers use
    /// (`convolutionForward(…)`, `sgdStep(…)`, …) build the op and call this: DeviceOps+*.swift.
    func run<Op: DeviceOp>(_ op: Op) throws -> Op.Result
}

/// Where a backend's buffers live.
public enum BackendMemory: Equatable, Sendable {
    /// Host memory: the CPU backends, and OpenCL devices that are the CPU (PoCL).
    case host
    /// Memory of the device's own, `bytes` in all (a GPU's global memory), `largestBuffer` at most per buffer.
    case device(bytes: UInt64, largestBuffer: UInt64)
}

/// Values being read back from a device (`Backend.downloadLater`).
public final class PendingDownload {
    private var wait: (() throws -> [Float])?
    private var result: [Float]?

    /// Values read already.
    public init(values: [Float]) { result = values }
    /// Values that `wait` delivers (once).
    public init(wait: @escaping () throws -> [Float]) { self.wait = wait }

    /// The values, waiting for them the first time.
    public func values() throws -> [Float] {
        if let result { return result }
        let v = try wait!()
        result = v
        wait = nil
        return v
    }
}

public extension Backend {
    var memory: BackendMemory { .host }
    var runsOnHostCPU: Bool { false }
    func downloadLater(_ buffer: DeviceBuffer) throws -> PendingDownload { PendingDownload(values: try download(buffer)) }
    var writesConvolutionSlices: Bool { false }
    /// The ReLU-or-nothing form of `convolutionForward(…, epilogue:)`.
    func convolutionForward(_ g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?,
                            output: DeviceBuffer, fusedReLU: Bool) throws {
        try convolutionForward(g, input: input, weights: weights, bias: bias, output: output, epilogue: fusedReLU ? .relu : nil)
    }
    func convolutionForward(_ g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?,
                            output: DeviceBuffer, channelOffset: Int, outputChannels: Int, fusedReLU: Bool) throws {
        try convolutionForward(g, input: input, weights: weights, bias: bias, output: output, channelOffset: channelOffset,
                               outputChannels: outputChannels, epilogue: fusedReLU ? .relu : nil)
    }
    /// Inner product without an epilogue.
    func innerProductForward(_ g: InnerProductGeometry, input: DeviceBuffer, weights: DeviceBuffer,
                             bias: DeviceBuffer?, output: DeviceBuffer) throws {
        try innerProductForward(g, input: input, weights: weights, bias: bias, output: output, epilogue: nil)
    }
    /// An activation over `count` values of one channel (functions without per-channel constants).
    func activationForward(_ a: Activation, input: DeviceBuffer, output: DeviceBuffer, count: Int) throws {
        try activationForward(a, ActivationGeometry(count: count), input: input, output: output)
    }
    func activationBackward(_ a: Activation, input: DeviceBuffer, output: DeviceBuffer,
                            outputGradient: DeviceBuffer, inputGradient: DeviceBuffer, count: Int) throws {
        try activationBackward(a, ActivationGeometry(count: count), input: input, output: output,
                               outputGradient: outputGradient, inputGradient: inputGradient)
    }

    /// The slice form of `convolutionForward` through the host (the reference backend's): the whole
    /// output computed into a buffer of its own, then copied into the slice.
    func hostConvolutionSliceForward(_ g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?,
                                     output: DeviceBuffer, channelOffset: Int, outputChannels: Int, epilogue: Activation?) throws {
        let plane = g.outHeight * g.outWidth, block = g.outChannels * plane
        try checkChannelSlice(g, output: output, channelOffset: channelOffset, outputChannels: outputChannels)
        if channelOffset == 0 && outputChannels == g.outChannels {
            return try convolutionForward(g, input: input, weights: weights, bias: bias, output: output, epilogue: epilogue)
        }
        let own = try makeBuffer(count: g.outputShape.count)
        try convolutionForward(g, input: input, weights: weights, bias: bias, output: own, epilogue: epilogue)
        let values = try download(own)
        var all = try download(output)
        for n in 0..<g.batch {
            let to = (n * outputChannels + channelOffset) * plane
            all.replaceSubrange(to..<(to + block), with: values[n * block..<(n + 1) * block])
        }
        try upload(all, to: output)
    }

    /// Throws unless channels [channelOffset, channelOffset + g.outChannels) of a [N, outputChannels,
    /// Ho, Wo] output exist in `output`.
    func checkChannelSlice(_ g: ConvGeometry, output: DeviceBuffer, channelOffset: Int, outputChannels: Int) throws {
        guard channelOffset >= 0, outputChannels >= g.outChannels, channelOffset <= outputChannels - g.outChannels else {
            throw UpdraftError(.invalidArgument, "\(name): \(g.outChannels) output channels at channel \(channelOffset) do not fit in \(outputChannels)")
        }
        let (count, overflow) = g.batch.multipliedReportingOverflow(by: outputChannels * g.outHeight * g.outWidth)
        guard !overflow, output.count >= count else {
            throw UpdraftError(.invalidArgument, "\(name): a convolution output of \(g.batch)x\(outputChannels)x\(g.outHeight)x\(g.outWidth) does not fit in \(output.count) values")
        }
    }

    func upload(_ values: [Float], to buffer: DeviceBuffer, offset: Int) throws {
        try checkRange(offset: offset, count: values.count, in: buffer, "upload destination")
        if values.isEmpty { return }
        if offset == 0, values.count == buffer.count { return try upload(values, to: buffer) }
        var all = try download(buffer)
        all.replaceSubrange(offset..<(offset + values.count), with: values)
        try upload(all, to: buffer)
    }

    func download(_ buffer: DeviceBuffer, offset: Int, count: Int) throws -> [Float] {
        try checkRange(offset: offset, count: count, in: buffer, "download source")
        if count == 0 { return [] }
        let all = try download(buffer)
        return offset == 0 && count == all.count ? all : Array(all[offset..<(offset + count)])
    }

    func copyRows(_ source: DeviceBuffer, rows sourceRows: [Int], to destination: DeviceBuffer,
                  rows destinationRows: [Int], rowLength: Int) throws {
        try checkRows(source, rows: sourceRows, destination, rows: destinationRows, rowLength: rowLength)
        if sourceRows.isEmpty || rowLength == 0 { return }
        let s = try download(source)
        var d = try download(destination)
        for (from, to) in zip(sourceRows, destinationRows) {
            d.replaceSubrange(to * rowLength..<(to + 1) * rowLength, with: s[from * rowLength..<(from + 1) * rowLength])
        }
        try upload(d, to: destination)
    }

    func copyRows(_ source: DeviceBuffer, rows sourceRows: [Int], to destination: DeviceBuffer,
                  rows destinationRows: [Int], rowLength: Int, toHalf: Bool) throws {
        try checkRows(source, rows: sourceRows, destination, rows: destinationRows, rowLength: rowLength, halfSide: toHalf ? 0 : 1)
        if sourceRows.isEmpty || rowLength == 0 { return }
        let s = try download(source)
        var d = try download(destination)
        s.withUnsafeBufferPointer { sp in
            d.withUnsafeMutableBufferPointer { dp in
                convertRows(UnsafeRawPointer(sp.baseAddress!), rows: sourceRows, UnsafeMutableRawPointer(dp.baseAddress!),
                            rows: destinationRows, rowLength: rowLength, toHalf: toHalf, range: 0..<(sourceRows.count * rowLength))
            }
        }
        try upload(d, to: destination)
    }

    /// Throws unless buffer[offset ..< offset + count] exists.
    func checkRange(offset: Int, count: Int, in buffer: DeviceBuffer, _ what: String) throws {
        guard offset >= 0, count >= 0, offset <= buffer.count - count else {
            // Not offset + count: that overflows (and traps) for the absurd ranges this rejects.
            throw UpdraftError(.invalidArgument, "\(name): \(what) range of \(count) values at \(offset) is outside its \(buffer.count) values")
        }
    }

    /// Throws unless `copyRows`' arguments are consistent: as many source as destination rows, every
    /// row inside its buffer, distinct destination rows, two different buffers.
    /// `halfSide`: nil, both sides hold floats; 0, the destination holds half rows; 1, the source does.
    func checkRows(_ source: DeviceBuffer, rows sourceRows: [Int], _ destination: DeviceBuffer, rows destinationRows: [Int],
                   rowLength: Int, halfSide: Int? = nil) throws {
        guard sourceRows.count == destinationRows.count, rowLength >= 0 else {
            throw UpdraftError(.invalidArgument, "\(name): copyRows got \(sourceRows.count) source rows, \(destinationRows.count) destination rows, row length \(rowLength)")
        }
        guard source !== destination else {
            throw UpdraftError(.invalidArgument, "\(name): copyRows needs two different buffers")
        }
        if rowLength == 0 { return }
        // A half buffer holds two values per float.
        let sourceRowCount = (halfSide == 1 ? 2 : 1) * source.count / rowLength
        let destinationRowCount = (halfSide == 0 ? 2 : 1) * destination.count / rowLength
        if let bad = sourceRows.first(where: { $0 < 0 || $0 >= sourceRowCount }) {
            throw UpdraftError(.invalidArgument, "\(name): copyRows source row \(bad) is outside the \(sourceRowCount) rows of \(rowLength) values")
        }
        if let bad = destinationRows.first(where: { $0 < 0 || $0 >= destinationRowCount }) {
            throw UpdraftError(.invalidArgument, "\(name): copyRows destination row \(bad) is outside the \(destinationRowCount) rows of \(rowLength) values")
        }
        guard Set(destinationRows).count == destinationRows.count else {
            throw UpdraftError(.invalidArgument, "\(name): copyRows destination rows repeat")
        }
    }

    func makeBuffer(_ values: [Float]) throws -> DeviceBuffer {
        let b = try makeBuffer(count: values.count)
        try upload(values, to: b)
        return b
    }
    func makeBuffer(_ tensor: Tensor) throws -> DeviceBuffer { try makeBuffer(tensor.data) }
    func download(_ buffer: DeviceBuffer, shape: Shape) throws -> Tensor {
        Tensor(shape: shape, data: try download(buffer))
    }
}

/// The conversion loop of `copyRows(..., toHalf:)` on host memory, over elements `range` of the rows
/// seen as one run of `rows.count * rowLength` (so threads can split it): float rows to binary16
/// (round to nearest even, as OpenCL's vstore_half) or back. The CPU twin of Kernels/half.cl; the
/// loops are CUpdraftKernels' (F16C's vcvtps2ph / vcvtph2ps at the AVX2 and AVX-512 levels).
func convertRows(_ source: UnsafeRawPointer, rows sourceRows: [Int], _ destination: UnsafeMutableRawPointer,
                 rows destinationRows: [Int], rowLength: Int, toHalf: Bool, range: Range<Int>) {
    var row = range.lowerBound / rowLength, column = range.lowerBound - row * rowLength
    var position = range.lowerBound
    while position < range.upperBound {
        let n = min(rowLength - column, range.upperBound - position)
        let from = sourceRows[row] * rowLength + column, to = destinationRows[row] * rowLength + column
        if toHalf {
            let s = source.assumingMemoryBound(to: Float.self), d = destination.assumingMemoryBound(to: UInt16.self)
            upd_float_to_half(s + from, d + to, n)
        } else {
            let s = source.assumingMemoryBound(to: UInt16.self), d = destination.assumingMemoryBound(to: Float.self)
            upd_half_to_float(s + from, d + to, n)
        }
        position += n
        row += 1
        column = 0
    }
}

/// Which operands of a forward op hold IEEE halves (two values per float of the buffer) rather than
/// floats: the frozen prefix's fp16 activations (`UpdateConfiguration.frozenActivationsHalfPrecision`).
public struct HalfStorage: Hashable, Sendable {
    /// The op's input is stored as halves.
    public var input: Bool
    /// The op's output is stored as halves (each value rounded to nearest even).
    public var output: Bool
    /// Both sides hold floats: the ordinary op.
    public static let none = HalfStorage(input: false, output: false)
    /// Floats in, halves out; halves in, floats out; halves on both sides.
    public init(input: Bool, output: Bool) { self.input = input; self.output = output }
    /// Floats (or bytes) a buffer of `count` values takes under this storage side.
    public static func floats(for count: Int, half: Bool) -> Int { half ? (count + 1) / 2 : count }
}
