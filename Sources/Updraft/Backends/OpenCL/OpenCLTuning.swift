/// Tile and work-group sizes for one device, passed to the kernels as `-D` defines. Chosen from a small
/// table by device (vendor, type), then clamped to the device's limits; anything unknown gets safe
/// defaults, so the same kernels run on an NVIDIA GPU, on PoCL and elsewhere.
public struct OpenCLTuning: Hashable, Sendable {
    /// Work-group size for 1-D element-wise and reduction kernels.
    public var workGroupSize: Int

    /// Safe everywhere: small work-groups, no assumptions about local memory.
    public static let safeDefaults = OpenCLTuning(workGroupSize: 64)

    /// The entry for a device: table lookup, then clamped to its limits.
    public static func forDevice(_ info: OpenCLDeviceInfo) -> OpenCLTuning {
        var t = safeDefaults
        switch info.type {
        case .gpu: t.workGroupSize = 256
        case .cpu, .accelerator, .other: t.workGroupSize = 64
        }
        t.workGroupSize = max(1, min(t.workGroupSize, info.maxWorkGroupSize, info.maxWorkItemSizes.first ?? 1))
        return t
    }
}
