import COpenCL

/// An OpenCL call that failed: the call, the status by name (`CL_OUT_OF_RESOURCES`, …), what it was
/// doing, and for program builds the compiler's log.
public struct OpenCLError: DeviceFailure, CustomStringConvertible, Sendable {
    /// The OpenCL status code the call returned (negative; `CL_OUT_OF_RESOURCES` is -5).
    public var status: Int32
    /// The OpenCL function that failed, e.g. "clCreateBuffer".
    public var call: String
    /// What Updraft was doing, e.g. "allocating 4096 bytes on NVIDIA H200"; empty when not given.
    public var context: String
    /// The compiler's build log when a program build failed; nil otherwise.
    public var buildLog: String?

    /// An error for `status` returned by `call`; `context` completes "while ..." in the message.
    public init(_ status: cl_int, _ call: String, _ context: String = "", buildLog: String? = nil) {
        self.status = status; self.call = call; self.context = context; self.buildLog = buildLog
    }

    /// The status's CL_* name (`openCLStatusName`), e.g. "CL_OUT_OF_RESOURCES".
    public var statusName: String { openCLStatusName(status) }

    /// "OpenCL call failed with NAME (code) while context", then the build log and the hint when there are any.
    public var description: String {
        var s = "OpenCL \(call) failed with \(statusName) (\(status))"
        if !context.isEmpty { s += " while \(context)" }
        if let log = buildLog, !log.isEmpty { s += "\nbuild log:\n\(log)" }
        if let hint { s += "\n  hint: \(hint)" }
        return s
    }

    /// What the user can do about the common failures.
    public var hint: String? {
        switch status {
        case CL_OUT_OF_RESOURCES, CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_OUT_OF_HOST_MEMORY:
            return "the device ran out of memory: use a smaller --batch-size or --compute-units cpuOnly"
        case CL_PLATFORM_NOT_FOUND_KHR:
            return "no OpenCL platform is installed: install an ICD (pocl-opencl-icd for the CPU, the GPU vendor's driver) or use --compute-units cpuOnly"
        case CL_DEVICE_NOT_FOUND, CL_DEVICE_NOT_AVAILABLE:
            return "check `updraft devices`; use --compute-units cpuOnly to train on the CPU"
        case CL_BUILD_PROGRAM_FAILURE:
            return "the device's OpenCL compiler rejected an Updraft kernel: report the build log; --compute-units cpuOnly avoids OpenCL"
        default:
            return nil
        }
    }
}

let CL_PLATFORM_NOT_FOUND_KHR: cl_int = -1001

/// Throws an `OpenCLError` unless `status` is CL_SUCCESS.
@inline(__always)
func clCheck(_ status: cl_int, _ call: String, _ context: @autoclosure () -> String = "") throws {
    if status != CL_SUCCESS { throw OpenCLError(status, call, context()) }
}

/// The CL_* name of an OpenCL status code.
public func openCLStatusName(_ status: Int32) -> String {
    switch status {
    case 0: return "CL_SUCCESS"
    case -1: return "CL_DEVICE_NOT_FOUND"
    case -2: return "CL_DEVICE_NOT_AVAILABLE"
    case -3: return "CL_COMPILER_NOT_AVAILABLE"
    case -4: return "CL_MEM_OBJECT_ALLOCATION_FAILURE"
    case -5: return "CL_OUT_OF_RESOURCES"
    case -6: return "CL_OUT_OF_HOST_MEMORY"
    case -7: return "CL_PROFILING_INFO_NOT_AVAILABLE"
    case -8: return "CL_MEM_COPY_OVERLAP"
    case -9: return "CL_IMAGE_FORMAT_MISMATCH"
    case -10: return "CL_IMAGE_FORMAT_NOT_SUPPORTED"
    case -11: return "CL_BUILD_PROGRAM_FAILURE"
    case -12: return "CL_MAP_FAILURE"
    case -13: return "CL_MISALIGNED_SUB_BUFFER_OFFSET"
    case -14: return "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST"
    case -15: return "CL_COMPILE_PROGRAM_FAILURE"
    case -16: return "CL_LINKER_NOT_AVAILABLE"
    case -17: return "CL_LINK_PROGRAM_FAILURE"
    case -18: return "CL_DEVICE_PARTITION_FAILED"
    case -19: return "CL_KERNEL_ARG_INFO_NOT_AVAILABLE"
    case -30: return "CL_INVALID_VALUE"
    case -31: return "CL_INVALID_DEVICE_TYPE"
    case -32: return "CL_INVALID_PLATFORM"
    case -33: return "CL_INVALID_DEVICE"
    case -34: return "CL_INVALID_CONTEXT"
    case -35: return "CL_INVALID_QUEUE_PROPERTIES"
    case -36: return "CL_INVALID_COMMAND_QUEUE"
    case -37: return "CL_INVALID_HOST_PTR"
    case -38: return "CL_INVALID_MEM_OBJECT"
    case -39: return "CL_INVALID_IMAGE_FORMAT_DESCRIPTOR"
    case -40: return "CL_INVALID_IMAGE_SIZE"
    case -41: return "CL_INVALID_SAMPLER"
    case -42: return "CL_INVALID_BINARY"
    case -43: return "CL_INVALID_BUILD_OPTIONS"
    case -44: return "CL_INVALID_PROGRAM"
    case -45: return "CL_INVALID_PROGRAM_EXECUTABLE"
    case -46: return "CL_INVALID_KERNEL_NAME"
    case -47: return "CL_INVALID_KERNEL_DEFINITION"
    case -48: return "CL_INVALID_KERNEL"
    case -49: return "CL_INVALID_ARG_INDEX"
    case -50: return "CL_INVALID_ARG_VALUE"
    case -51: return "CL_INVALID_ARG_SIZE"
    case -52: return "CL_INVALID_KERNEL_ARGS"
    case -53: return "CL_INVALID_WORK_DIMENSION"
    case -54: return "CL_INVALID_WORK_GROUP_SIZE"
    case -55: return "CL_INVALID_WORK_ITEM_SIZE"
    case -56: return "CL_INVALID_GLOBAL_OFFSET"
    case -57: return "CL_INVALID_EVENT_WAIT_LIST"
    case -58: return "CL_INVALID_EVENT"
    case -59: return "CL_INVALID_OPERATION"
    case -60: return "CL_INVALID_GL_OBJECT"
    case -61: return "CL_INVALID_BUFFER_SIZE"
    case -62: return "CL_INVALID_MIP_LEVEL"
    case -63: return "CL_INVALID_GLOBAL_WORK_SIZE"
    case -64: return "CL_INVALID_PROPERTY"
    case -65: return "CL_INVALID_IMAGE_DESCRIPTOR"
    case -66: return "CL_INVALID_COMPILER_OPTIONS"
    case -67: return "CL_INVALID_LINKER_OPTIONS"
    case -68: return "CL_INVALID_DEVICE_PARTITION_COUNT"
    case -1001: return "CL_PLATFORM_NOT_FOUND_KHR"
    default: return "CL_ERROR_\(status)"
    }
}
