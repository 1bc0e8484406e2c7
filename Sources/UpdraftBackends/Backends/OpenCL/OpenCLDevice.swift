import COpenCL
import Foundation

/// What kind of device OpenCL reports.
public enum OpenCLDeviceType: String, Sendable {
    /// CL_DEVICE_TYPE_GPU, CL_DEVICE_TYPE_CPU, CL_DEVICE_TYPE_ACCELERATOR, or anything else (custom devices); the raw value is the name `updraft devices` prints.
    case gpu = "GPU", cpu = "CPU", accelerator = "accelerator", other = "other"
}

/// One OpenCL device and the facts the engine needs about it (value type: the handle is not owned).
public struct OpenCLDeviceInfo: Sendable, CustomStringConvertible {
    /// Name of the platform the device belongs to (`CL_PLATFORM_NAME`, e.g. "Portable Computing Language").
    public var platformName: String
    /// The platform's version string (`CL_PLATFORM_VERSION`, "OpenCL 3.0 ...").
    public var platformVersion: String
    /// The device's name as the driver reports it (`CL_DEVICE_NAME`); also part of `OpenCLBackend.name`.
    public var name: String
    /// The device vendor (`CL_DEVICE_VENDOR`); tuning tables are chosen by it.
    public var vendor: String
    /// GPU, CPU, accelerator or other (`CL_DEVICE_TYPE`; the first matching bit wins).
    public var type: OpenCLDeviceType
    /// Parallel compute units (`CL_DEVICE_MAX_COMPUTE_UNITS`): cores of a CPU device, SMs/CUs of a GPU.
    public var computeUnits: Int
    /// Maximum clock frequency in MHz (`CL_DEVICE_MAX_CLOCK_FREQUENCY`).
    public var clockMHz: Int
    /// Device (global) memory in bytes (`CL_DEVICE_GLOBAL_MEM_SIZE`).
    public var globalMemory: UInt64
    /// Local (work-group shared) memory in bytes (`CL_DEVICE_LOCAL_MEM_SIZE`); bounds the tile sizes kernels may use.
    public var localMemory: UInt64
    /// Largest single buffer allocation in bytes (`CL_DEVICE_MAX_MEM_ALLOC_SIZE`).
    public var maxAllocation: UInt64
    /// Most work items in one work group (`CL_DEVICE_MAX_WORK_GROUP_SIZE`).
    public var maxWorkGroupSize: Int
    /// Most work items per work-group dimension (`CL_DEVICE_MAX_WORK_ITEM_SIZES`), one entry per dimension.
    public var maxWorkItemSizes: [Int]
    /// The OpenCL C language version kernels compile against (`CL_DEVICE_OPENCL_C_VERSION`).
    public var openCLCVersion: String
    /// The driver's version string (`CL_DRIVER_VERSION`).
    public var driverVersion: String
    /// The device's extension names (`CL_DEVICE_EXTENSIONS`, split on spaces), e.g. "cl_khr_fp64".
    public var extensions: Set<String>
    /// Index in `OpenCLRuntime.devices()` order (platforms, then devices).
    public var index: Int

    /// Whether the device supports double precision (the `cl_khr_fp64` extension).
    public var supportsDouble: Bool { extensions.contains("cl_khr_fp64") }

    /// "name (type, platform)", e.g. "pthread-cpu (CPU, Portable Computing Language)".
    public var description: String { "\(name) (\(type.rawValue), \(platformName))" }
}

/// An OpenCL device handle together with its information.
public struct OpenCLDevice: @unchecked Sendable {
    /// The OpenCL device handle; not retained or released (devices from `clGetDeviceIDs` need neither).
    public let id: cl_device_id
    /// The platform the device was listed under.
    public let platform: cl_platform_id
    /// The device's facts, read once at discovery.
    public let info: OpenCLDeviceInfo
}

/// Platform and device discovery. A machine without any OpenCL platform is normal: `devices()`
/// returns an empty list and `availability` says why.
public enum OpenCLRuntime {
    /// Every device of every platform, in platform order. Empty when no platform is installed.
    /// One thread at a time: the ICD loader (ocl-icd) and PoCL initialise themselves on the first
    /// listing, and tasks starting at once listed concurrently into a crash (strlen of NULL) or an
    /// empty platform list.
    public static func devices() throws -> [OpenCLDevice] {
        listing.lock(); defer { listing.unlock() }
        var result: [OpenCLDevice] = []
        for platform in try platforms() {
            var count: cl_uint = 0
            let status = clGetDeviceIDs(platform, cl_device_type(CL_DEVICE_TYPE_ALL), 0, nil, &count)
            if status == CL_DEVICE_NOT_FOUND || count == 0 { continue }
            try clCheck(status, "clGetDeviceIDs", "listing devices")
            var ids = [cl_device_id?](repeating: nil, count: Int(count))
            try clCheck(clGetDeviceIDs(platform, cl_device_type(CL_DEVICE_TYPE_ALL), count, &ids, nil),
                        "clGetDeviceIDs", "listing devices")
            for case let id? in ids {
                let info = try deviceInfo(id, platform: platform, index: result.count)
                result.append(OpenCLDevice(id: id, platform: platform, info: info))
            }
        }
        return result
    }

    /// A one-line explanation when there is no usable OpenCL device, or nil when there is one.
    public static var availability: String? {
        do {
            return try devices().isEmpty
                ? "no OpenCL platform or device found (install pocl-opencl-icd or a GPU driver's ICD); the CPU path works"
                : nil
        } catch {
            return "OpenCL is unavailable: \(error)"
        }
    }

    /// Held while `devices()` lists platforms and devices.
    private static let listing = NSLock()

    static func platforms() throws -> [cl_platform_id] {
        var count: cl_uint = 0
        let status = clGetPlatformIDs(0, nil, &count)
        // ocl-icd answers CL_PLATFORM_NOT_FOUND_KHR when no ICD is registered: that is "no platforms".
        if status == CL_PLATFORM_NOT_FOUND_KHR || count == 0 { return [] }
        try clCheck(status, "clGetPlatformIDs", "listing platforms")
        var ids = [cl_platform_id?](repeating: nil, count: Int(count))
        try clCheck(clGetPlatformIDs(count, &ids, nil), "clGetPlatformIDs", "listing platforms")
        return ids.compactMap { $0 }
    }

    /// The string an OpenCL info query (`call`: clGetDeviceInfo, clGetPlatformInfo) gives, asked once
    /// for its size and once for its bytes; `query` takes (size, value, size returned) as those do.
    static func infoString(_ call: String,
                           _ query: (Int, UnsafeMutableRawPointer?, UnsafeMutablePointer<Int>?) -> cl_int) throws -> String {
        var size = 0
        try clCheck(query(0, nil, &size), call)
        var bytes = [CChar](repeating: 0, count: max(1, size))
        try clCheck(query(size, &bytes, nil), call)
        return String(decoding: bytes.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func deviceInfo(_ id: cl_device_id, platform: cl_platform_id, index: Int) throws -> OpenCLDeviceInfo {
        func string(_ param: Int32) throws -> String {
            try infoString("clGetDeviceInfo") { clGetDeviceInfo(id, cl_device_info(param), $0, $1, $2) }
                .trimmingCharacters(in: .whitespaces)
        }
        func scalar<T: FixedWidthInteger>(_ param: Int32, _: T.Type) throws -> T {
            var v: T = 0
            try clCheck(clGetDeviceInfo(id, cl_device_info(param), MemoryLayout<T>.size, &v, nil), "clGetDeviceInfo")
            return v
        }
        func platformString(_ param: Int32) throws -> String {
            try infoString("clGetPlatformInfo") { clGetPlatformInfo(platform, cl_platform_info(param), $0, $1, $2) }
        }
        let rawType = try scalar(CL_DEVICE_TYPE, cl_device_type.self)
        let type: OpenCLDeviceType =
            rawType & cl_device_type(CL_DEVICE_TYPE_GPU) != 0 ? .gpu :
            rawType & cl_device_type(CL_DEVICE_TYPE_CPU) != 0 ? .cpu :
            rawType & cl_device_type(CL_DEVICE_TYPE_ACCELERATOR) != 0 ? .accelerator : .other
        let dims = Int(try scalar(CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS, cl_uint.self))
        var sizes = [Int](repeating: 0, count: dims)
        try clCheck(clGetDeviceInfo(id, cl_device_info(CL_DEVICE_MAX_WORK_ITEM_SIZES), dims * MemoryLayout<Int>.size,
                                    &sizes, nil), "clGetDeviceInfo")
        return OpenCLDeviceInfo(
            platformName: try platformString(CL_PLATFORM_NAME),
            platformVersion: try platformString(CL_PLATFORM_VERSION),
            name: try string(CL_DEVICE_NAME),
            vendor: try string(CL_DEVICE_VENDOR),
            type: type,
            computeUnits: Int(try scalar(CL_DEVICE_MAX_COMPUTE_UNITS, cl_uint.self)),
            clockMHz: Int(try scalar(CL_DEVICE_MAX_CLOCK_FREQUENCY, cl_uint.self)),
            globalMemory: try scalar(CL_DEVICE_GLOBAL_MEM_SIZE, cl_ulong.self),
            localMemory: try scalar(CL_DEVICE_LOCAL_MEM_SIZE, cl_ulong.self),
            maxAllocation: try scalar(CL_DEVICE_MAX_MEM_ALLOC_SIZE, cl_ulong.self),
            maxWorkGroupSize: try scalar(CL_DEVICE_MAX_WORK_GROUP_SIZE, Int.self),
            maxWorkItemSizes: sizes,
            openCLCVersion: try string(CL_DEVICE_OPENCL_C_VERSION),
            driverVersion: try string(CL_DRIVER_VERSION),
            extensions: Set(try string(CL_DEVICE_EXTENSIONS).split(separator: " ").map(String.init)),
            index: index)
    }
}
