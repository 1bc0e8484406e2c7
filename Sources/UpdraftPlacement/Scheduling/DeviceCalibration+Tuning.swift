import Foundation
import UpdraftBackends

/// Kernel tunings as the calibration cache and `DeviceCalibration` name them: the file, its
/// entries and keys are `KernelTuningStore`'s (Backends/OpenCL/), in the same folder.
extension CalibrationCache {
    /// The tuning file's name in the calibration folder.
    public static let tuningFileName = KernelTuningStore.fileName
    /// Bumped when the tuning method or the variant format changes.
    public static let tuningFormatVersion = KernelTuningStore.formatVersion
    /// Set to `off` to ignore stored tunings (the table decides everywhere).
    public static let tuningVariable = KernelTuningStore.variable

    /// The kernel-tuning store in this cache's folder.
    public var tuningStore: KernelTuningStore { KernelTuningStore(directory: directory) }
    /// The tuning file: `kernel-tuning.json` in `directory`.
    public var tuningFileURL: URL { tuningStore.fileURL }
    /// Every stored tuning; empty when the file is missing, unreadable, corrupt or of another format.
    public func loadTunings() -> [String: KernelTuningEntry] { tuningStore.load() }
    /// The stored tuning for `key`, if any.
    public func tuning(_ key: String) -> KernelTuningEntry? { tuningStore.entry(key) }
    /// Adds or replaces one tuning (keeping the others), writing the file atomically.
    public func storeTuning(_ entry: KernelTuningEntry, key: String) throws { try tuningStore.store(entry, key: key) }
}

extension DeviceCalibration {
    /// FNV-1a (64-bit) of the tuned kernels' sources, in hex: a changed kernel invalidates its tunings.
    public static var kernelSourceHash: String { KernelTuningStore.kernelSourceHash }
    /// The key of an OpenCL device's kernel tuning: device name, driver version, kernel-source hash.
    public static func tuningKey(_ info: OpenCLDeviceInfo) -> String { KernelTuningStore.key(info) }
}

extension OpenCLTuning {
    /// This tuning with the variants stored for `info`'s device in `cache`'s folder (see
    /// `withStoredTuning(for:store:environment:)`).
    public func withStoredTuning(for info: OpenCLDeviceInfo, cache: CalibrationCache?,
                                 environment: [String: String] = ProcessInfo.processInfo.environment) -> OpenCLTuning {
        withStoredTuning(for: info, store: cache?.tuningStore, environment: environment)
    }
}
