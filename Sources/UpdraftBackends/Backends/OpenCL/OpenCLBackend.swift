import COpenCL
import UpdraftCore
/// The `Backend` for one OpenCL device. Tensors stay on the device; the host reads back only what it
/// asks for (`download`). Kernel programs are built once per (device, file, defines) by the context.
/// The ops live in extensions, one file per kernel family (OpenCLBackend+*.swift).
public final class OpenCLBackend: Backend {
    /// The device's context: queue, buffers and the cache of built programs.
    public let context: OpenCLContext
    /// Tile and work-group sizes the kernels are built with (see `init(context:tuning:)` for the default).
    public let tuning: OpenCLTuning
    /// Scratch memory and launch recording of the GEMM-based ops (OpenCLGemm.swift).
    public let gemmWorkspace = OpenCLGemmWorkspace()
    /// Index buffers of queued `copyRows` launches, held until those kernels finish (OpenCLBackend+Rows.swift).
    let inFlight = OpenCLInFlightBuffers()
    /// The device buffer image batches cross in as bytes (`uploadPixels`), reused batch after batch.
    let pixelStaging = OpenCLPixelStaging()
    /// This backend's kernel objects (see `kernel(_:_:defines:)`).
    let kernels = OpenCLKernelCache()
    /// Programs preparation asked for, built together before the first step (OpenCLBackend+Preparation.swift).
    let requestedPrograms = OpenCLRequestedPrograms()

    /// "opencl:" followed by the device name, e.g. "opencl:NVIDIA H200".
    public var name: String { "opencl:\(context.device.info.name)" }
    /// Facts about the device this backend runs on.
    public var device: OpenCLDeviceInfo { context.device.info }

    /// Without a `tuning`, the device's table entry with whatever `updraft tune` stored for it in the
    /// cache folder (`KernelTuningStore`; `UPDRAFT_KERNEL_TUNING=off` ignores the stored one).
    public init(context: OpenCLContext, tuning: OpenCLTuning? = nil) {
        self.context = context
        let info = context.device.info
        self.tuning = tuning ?? OpenCLTuning.forDevice(info).withStoredTuning(for: info, store: KernelTuningStore())
    }

    /// Opens a context (and queue) on `device` with the default tuning. Throws `OpenCLError` when the context cannot be created.
    public convenience init(device: OpenCLDevice) throws {
        self.init(context: try OpenCLContext(device: device))
    }

    /// One backend per OpenCL device present (empty without OpenCL); devices that fail to open are
    /// reported through `failures`.
    public static func all() -> (backends: [OpenCLBackend], failures: [String]) {
        var backends: [OpenCLBackend] = [], failures: [String] = []
        let devices: [OpenCLDevice]
        do { devices = try OpenCLRuntime.devices() } catch { return ([], ["OpenCL: \(error)"]) }
        for d in devices {
            do { backends.append(try OpenCLBackend(device: d)) } catch { failures.append("\(d.info.name): \(error)") }
        }
        return (backends, failures)
    }

    /// The kernel `kernel` of the embedded file `file`, built with `defines` and the activation
    /// table's ACT_* codes (`ActivationKind.openCLDefines`, read by Kernels/activation.h). The
    /// program is the context's (built once); the kernel object is this backend's own, so tasks
    /// whose backends share a context never set each other's arguments between set and launch.
    func kernel(_ file: String, _ kernel: String, defines: [String: String] = [:]) throws -> OpenCLKernel {
        let all = programDefines(defines)
        return try kernels.kernel(file: file, name: kernel, defines: all) {
            try context.program(named: file, defines: all).makeKernel(kernel)
        }
    }

    /// The OpenCL buffer behind a `DeviceBuffer`, or an error naming the mix-up.
    func cl(_ b: DeviceBuffer) throws -> OpenCLBuffer {
        guard let cb = b as? OpenCLBuffer, cb.context === context else {
            throw UpdraftError(.invalidArgument, "\(name) was handed a buffer that belongs to another backend or device")
        }
        return cb
    }

    // MARK: Memory

    /// Allocates `count` floats on the device (uninitialised); throws when the device is out of memory.
    public func makeBuffer(count: Int) throws -> DeviceBuffer { try context.makeBuffer(count: count) }

    /// Up to 65,536 floats go through a staging buffer and a queued copy (does not wait for queued work); larger uploads are a blocking write.
    public func upload(_ values: [Float], to buffer: DeviceBuffer) throws {
        let b = try cl(buffer)
        guard values.count == b.count else {
            throw UpdraftError(.invalidArgument, "uploading \(values.count) values into a buffer of \(b.count)")
        }
        if values.count <= Self.stagedUploadLimit {
            try stagedUpload(values, to: b)
        } else {
            try context.write(values, to: b)
        }
    }

    /// Uploads up to this many floats (labels, targets, small tensors) go through `stagedUpload`.
    static let stagedUploadLimit = 1 << 16

    /// A blocking write in an in-order queue returns only once everything queued before it has run,
    /// so a step that uploads its labels after queueing its forward pass would wait for that pass.
    /// Small uploads instead fill a staging buffer at creation (no queue involved) and queue a copy
    /// into place; the staging buffer is held until the copy has run.
    private func stagedUpload(_ values: [Float], to buffer: OpenCLBuffer) throws {
        if values.isEmpty { return }
        let staging = try values.withUnsafeBytes { raw in
            try OpenCLBuffer(context: context, count: values.count, initial: raw.baseAddress)
        }
        try inFlight.releaseFinished(context: context)
        var event: cl_event? = nil
        try clCheck(clEnqueueCopyBuffer(context.queue, staging.mem, buffer.mem, 0, 0, values.count * 4, 0, nil, &event),
                    "clEnqueueCopyBuffer", "uploading \(values.count) floats")
        try inFlight.hold(staging, until: event.map(OpenCLEvent.init), context: context)
    }

    /// Blocking read: waits for every queued kernel, then copies the buffer to the host.
    public func download(_ buffer: DeviceBuffer) throws -> [Float] { try context.read(try cl(buffer)) }
    /// Queues a non-blocking read; the returned download waits for it when collected.
    public func downloadLater(_ buffer: DeviceBuffer) throws -> PendingDownload {
        PendingDownload(wait: try context.readLater(try cl(buffer)))
    }

    /// Queued fill (`clEnqueueFillBuffer`); returns without waiting.
    public func fill(_ buffer: DeviceBuffer, with value: Float) throws { try context.fill(try cl(buffer), with: value) }

    /// Queued device-to-device copy; returns without waiting.
    public func copy(_ source: DeviceBuffer, to destination: DeviceBuffer) throws {
        try context.copy(try cl(source), to: try cl(destination))
    }

    /// Waits for the queue to finish (`clFinish`), then frees staging and index buffers of finished launches.
    public func synchronize() throws {
        try context.finish()
        try inFlight.releaseFinished(context: context)
    }
}
