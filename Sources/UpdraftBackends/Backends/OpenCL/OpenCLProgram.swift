import COpenCL
import Foundation
import UpdraftCore

/// A built program. A build failure throws an `OpenCLError` carrying the compiler's log.
public final class OpenCLProgram {
    let program: cl_program
    /// The embedded file name (e.g. "gemm.cl") or the name given with the source; used in error messages.
    public let name: String
    /// The full build options: the context's `baseBuildOptions`, then one `-D NAME=VALUE` per define.
    public let options: String
    unowned let context: OpenCLContext
    /// `kernel(_:)`'s kernels, guarded by `kernelsLock`.
    private var kernels: [String: OpenCLKernel] = [:]
    private let kernelsLock = NSLock()

    init(context: OpenCLContext, source: String, name: String, options: String) throws {
        self.context = context
        self.name = name
        self.options = options
        var status: cl_int = 0
        let created: cl_program? = source.withCString { ptr in
            var p: UnsafePointer<CChar>? = ptr
            var length = strlen(ptr)
            return clCreateProgramWithSource(context.context, 1, &p, &length, &status)
        }
        guard let prog = created, status == CL_SUCCESS else {
            throw OpenCLError(status, "clCreateProgramWithSource", "loading \(name)")
        }
        try Self.build(prog, context: context, options: options, what: "building \(name)")
        // Assigned only once built: a throwing init that had set every property would run deinit.
        program = prog
    }

    /// A program from a binary this driver produced earlier (`binary`), built with the same options.
    /// Throws when the driver refuses the binary (another driver, a corrupt file): build from source then.
    init(context: OpenCLContext, binary: [UInt8], name: String, options: String) throws {
        self.context = context
        self.name = name
        self.options = options
        var status: cl_int = 0, binaryStatus: cl_int = 0
        var device: cl_device_id? = context.device.id
        var length = binary.count
        let created: cl_program? = binary.withUnsafeBufferPointer { bytes in
            var pointer: UnsafePointer<UInt8>? = bytes.baseAddress
            return clCreateProgramWithBinary(context.context, 1, &device, &length, &pointer, &binaryStatus, &status)
        }
        guard let prog = created, status == CL_SUCCESS, binaryStatus == CL_SUCCESS else {
            if let created { clReleaseProgram(created) }
            throw OpenCLError(status != CL_SUCCESS ? status : binaryStatus, "clCreateProgramWithBinary", "loading the cached binary of \(name)")
        }
        try Self.build(prog, context: context, options: options, what: "building \(name) from its cached binary")
        program = prog
    }

    /// `clBuildProgram` for the context's device; on failure releases `program` and throws with the compiler's log.
    private static func build(_ program: cl_program, context: OpenCLContext, options: String, what: String) throws {
        var device: cl_device_id? = context.device.id
        let buildStatus = clBuildProgram(program, 1, &device, options, nil, nil)
        if buildStatus != CL_SUCCESS {
            let log = Self.buildLog(program, device: context.device.id)
            clReleaseProgram(program)
            throw OpenCLError(buildStatus, "clBuildProgram", "\(what) with \(options) for \(context.device.info.name)", buildLog: log)
        }
    }

    /// The built program's binary for its device (`CL_PROGRAM_BINARIES`), or nil when the driver gives none.
    func binary() -> [UInt8]? {
        var size = 0
        guard clGetProgramInfo(program, cl_program_info(CL_PROGRAM_BINARY_SIZES), MemoryLayout<Int>.size, &size, nil) == CL_SUCCESS,
              size > 0 else { return nil }
        var bytes = [UInt8](repeating: 0, count: size)
        let status: cl_int = bytes.withUnsafeMutableBufferPointer { buffer in
            var pointer: UnsafeMutablePointer<UInt8>? = buffer.baseAddress
            return clGetProgramInfo(program, cl_program_info(CL_PROGRAM_BINARIES), MemoryLayout<UnsafeMutablePointer<UInt8>?>.size,
                                    &pointer, nil)
        }
        return status == CL_SUCCESS ? bytes : nil
    }

    deinit {
        kernels.removeAll()
        clReleaseProgram(program)
    }

    static func buildLog(_ program: cl_program, device: cl_device_id) -> String {
        var size = 0
        guard clGetProgramBuildInfo(program, device, cl_program_build_info(CL_PROGRAM_BUILD_LOG), 0, nil, &size) == CL_SUCCESS,
              size > 1 else { return "" }
        var bytes = [CChar](repeating: 0, count: size)
        guard clGetProgramBuildInfo(program, device, cl_program_build_info(CL_PROGRAM_BUILD_LOG), size, &bytes, nil) == CL_SUCCESS
        else { return "" }
        return String(decoding: bytes.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The kernel `name`, created once and reused (set its arguments before each launch). One
    /// kernel object holds one set of arguments: code that may launch it from several threads at
    /// once (tasks sharing a context) makes its own with `makeKernel(_:)`, as `OpenCLBackend` does.
    public func kernel(_ name: String) throws -> OpenCLKernel {
        kernelsLock.lock(); defer { kernelsLock.unlock() }
        if let k = kernels[name] { return k }
        let kernel = try makeKernel(name)
        kernels[name] = kernel
        return kernel
    }

    /// A new kernel object for the function `name`, with arguments of its own.
    public func makeKernel(_ name: String) throws -> OpenCLKernel {
        var status: cl_int = 0
        guard let k = clCreateKernel(program, name, &status), status == CL_SUCCESS else {
            throw OpenCLError(status, "clCreateKernel", "looking up kernel \(name) in \(self.name)")
        }
        return OpenCLKernel(kernel: k, name: name, program: self)
    }
}

/// One owner's kernel objects by file, function and defines (an `OpenCLBackend`'s): each owner sets
/// and launches its own, so owners on different threads sharing one context never race on arguments.
final class OpenCLKernelCache: @unchecked Sendable {
    private struct Key: Hashable { var file: String; var name: String; var defines: [String: String] }
    private var kernels: [Key: OpenCLKernel] = [:]
    private let lock = NSLock()

    /// The cached kernel, or the one `make` creates (then cached).
    func kernel(file: String, name: String, defines: [String: String], make: () throws -> OpenCLKernel) throws -> OpenCLKernel {
        let key = Key(file: file, name: name, defines: defines)
        lock.lock(); defer { lock.unlock() }
        if let k = kernels[key] { return k }
        let k = try make()
        kernels[key] = k
        return k
    }
}

/// A kernel with typed argument setters and launches on its context's queue.
public final class OpenCLKernel {
    let kernel: cl_kernel
    /// The kernel function's name in the program source.
    public let name: String
    unowned let program: OpenCLProgram

    init(kernel: cl_kernel, name: String, program: OpenCLProgram) {
        self.kernel = kernel; self.name = name; self.program = program
    }

    deinit { clReleaseKernel(kernel) }

    private func setRaw(_ index: Int, _ size: Int, _ value: UnsafeRawPointer?) throws {
        try clCheck(clSetKernelArg(kernel, cl_uint(index), size, value), "clSetKernelArg",
                    "setting argument \(index) of \(name)")
    }

    /// A `__global float*` argument: the buffer's memory object.
    public func set(_ index: Int, _ buffer: OpenCLBuffer) throws {
        var mem: cl_mem? = buffer.mem
        try setRaw(index, MemoryLayout<cl_mem>.size, &mem)
    }
    /// An `int` argument (checked to fit in 32 bits).
    public func set(_ index: Int, _ value: Int) throws {
        guard let v32 = Int32(exactly: value) else {
            throw UpdraftError(.invalidArgument, "argument \(index) of \(name) (\(value)) does not fit in a 32-bit int")
        }
        var v = v32
        try setRaw(index, 4, &v)
    }
    /// A `float` argument.
    public func set(_ index: Int, _ value: Float) throws {
        var v = value
        try setRaw(index, 4, &v)
    }
    /// Local memory of `bytes` bytes.
    public func setLocal(_ index: Int, bytes: Int) throws { try setRaw(index, bytes, nil) }

    /// Sets every argument in order: OpenCLBuffer, Int, Float, or `LocalMemory`.
    public func setArguments(_ arguments: [KernelArgument]) throws {
        for (i, a) in arguments.enumerated() {
            switch a {
            case let .buffer(b): try set(i, b)
            case let .int(v): try set(i, v)
            case let .float(v): try set(i, v)
            case let .local(bytes): try setLocal(i, bytes: bytes)
            }
        }
    }

    /// Enqueues the kernel. `global` is rounded up to a multiple of `local` (when given), so kernels
    /// must check their bounds. Returns a profiling event when `profile` is set.
    @discardableResult
    public func launch(global: [Int], local: [Int]? = nil, profile: Bool = false) throws -> OpenCLEvent? {
        let dims = global.count
        guard (1...3).contains(dims), local == nil || local!.count == dims else {
            throw UpdraftError(.invalidArgument, "launching \(name): bad work sizes \(global) / \(local ?? [])")
        }
        var g = global.map { max(1, $0) }
        if let local { for i in 0..<dims { g[i] = (g[i] + local[i] - 1) / local[i] * local[i] } }
        var event: cl_event? = nil
        let q = program.context.queue
        let status: cl_int = withUnsafeMutablePointer(to: &event) { eventPointer in
            g.withUnsafeBufferPointer { gp in
                let ep = profile ? eventPointer : nil
                if let local {
                    return local.withUnsafeBufferPointer { lp in
                        clEnqueueNDRangeKernel(q, kernel, cl_uint(dims), nil, gp.baseAddress, lp.baseAddress, 0, nil, ep)
                    }
                }
                return clEnqueueNDRangeKernel(q, kernel, cl_uint(dims), nil, gp.baseAddress, nil, 0, nil, ep)
            }
        }
        try clCheck(status, "clEnqueueNDRangeKernel", "launching \(name) over \(g) / \(local.map { "\($0)" } ?? "auto")")
        return event.map(OpenCLEvent.init)
    }

    /// The device's preferred work-group size multiple for this kernel (warp/wavefront width).
    public var preferredWorkGroupMultiple: Int {
        var v = 0
        let s = clGetKernelWorkGroupInfo(kernel, program.context.device.id,
                                         cl_kernel_work_group_info(CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE),
                                         MemoryLayout<Int>.size, &v, nil)
        return s == CL_SUCCESS && v > 0 ? v : 1
    }

    /// The largest work-group this kernel can be launched with on its device.
    public var maxWorkGroupSize: Int {
        var v = 0
        let s = clGetKernelWorkGroupInfo(kernel, program.context.device.id,
                                         cl_kernel_work_group_info(CL_KERNEL_WORK_GROUP_SIZE), MemoryLayout<Int>.size, &v, nil)
        return s == CL_SUCCESS && v > 0 ? v : 1
    }
}

/// One kernel argument for `OpenCLKernel.setArguments`, in parameter order: a buffer, an `int` (checked to fit 32 bits), a `float`, or `bytes` of `__local` memory.
public enum KernelArgument {
    /// A device buffer, passed as a `__global` pointer.
    case buffer(OpenCLBuffer)
    /// An integer, passed as a 32-bit `int` (an error if it does not fit).
    case int(Int)
    /// A 32-bit `float`.
    case float(Float)
    /// A `__local` buffer of this many bytes, allocated per work-group.
    case local(bytes: Int)
}

/// A profiling event: device-side start and end times of one command.
public final class OpenCLEvent {
    let event: cl_event
    init(_ event: cl_event) { self.event = event }
    deinit { clReleaseEvent(event) }

    /// Blocks until the command has finished; throws `OpenCLError` when the wait fails.
    public func wait() throws {
        var e: cl_event? = event
        try clCheck(clWaitForEvents(1, &e), "clWaitForEvents")
    }

    /// Whether the command has finished (or ended in an error): it no longer touches its buffers.
    /// A failed query counts as not finished.
    public var isComplete: Bool {
        var status: cl_int = 0
        let s = clGetEventInfo(event, cl_event_info(CL_EVENT_COMMAND_EXECUTION_STATUS), MemoryLayout<cl_int>.size, &status, nil)
        return s == CL_SUCCESS && status <= CL_COMPLETE
    }

    /// Device time between the command's start and end, in seconds (waits for it first).
    public func elapsedSeconds() throws -> Double {
        try wait()
        var start: cl_ulong = 0, end: cl_ulong = 0
        try clCheck(clGetEventProfilingInfo(event, cl_profiling_info(CL_PROFILING_COMMAND_START), 8, &start, nil),
                    "clGetEventProfilingInfo")
        try clCheck(clGetEventProfilingInfo(event, cl_profiling_info(CL_PROFILING_COMMAND_END), 8, &end, nil),
                    "clGetEventProfilingInfo")
        return Double(end &- start) * 1e-9
    }
}
