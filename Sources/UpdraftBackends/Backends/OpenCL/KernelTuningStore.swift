import Foundation
import UpdraftCore

/// Kernel tunings (`updraft tune`) kept on disk: one JSON file, `kernel-tuning.json`, in the cache
/// folder (`CacheDirectory`, beside the device calibrations). An entry is keyed by device name,
/// driver version and a hash of the GEMM and convolution kernels' sources (and the tuning method), so
/// a new driver or a changed kernel is never run with a stale choice: it falls back to the table in
/// `OpenCLTuning` until tuned again. A file that cannot be read or decoded is ignored and rewritten.
public struct KernelTuningEntry: Codable, Sendable, Equatable {
    /// The winning variant per shape class (`KernelShape.classKey`).
    public var variants: [String: KernelVariant]
    /// Per shape class, what was measured: the shape tuned and each candidate's seconds (the ones
    /// that passed the reference check), for the record.
    public var measurements: [String: KernelTuningMeasurement]
    /// The OpenCL device's name ("platform: device"), as it reported it.
    public var device: String
    /// The driver version the tuning was measured with; a new driver invalidates it.
    public var driverVersion: String
    /// `KernelTuningStore.kernelSourceHash` when it was measured; a changed kernel invalidates it.
    public var kernelSourceHash: String
    /// The tuning search space used (`KernelTuningSpace.rawValue`).
    public var space: String
    /// When the tuning was measured (ISO 8601 in the file).
    public var measuredAt: Date

    /// An entry as `updraft tune` stores it; `measuredAt` defaults to now.
    public init(variants: [String: KernelVariant], measurements: [String: KernelTuningMeasurement], device: String,
                driverVersion: String, kernelSourceHash: String, space: String, measuredAt: Date = Date()) {
        self.variants = variants; self.measurements = measurements; self.device = device
        self.driverVersion = driverVersion; self.kernelSourceHash = kernelSourceHash; self.space = space
        self.measuredAt = measuredAt
    }
}

/// One shape class's timings: the shape that was timed, the table's choice and the winner's seconds.
public struct KernelTuningMeasurement: Codable, Sendable, Equatable {
    /// The shape that was timed for this shape class, as text.
    public var shape: String
    /// Seconds of the built-in table's choice for the shape; nil when it was not timed or failed the check.
    public var tableSeconds: Double?
    /// Seconds of the winning variant.
    public var bestSeconds: Double
    /// Seconds of CLBlast's kernel, when it was a candidate.
    public var clblastSeconds: Double?
    /// How many candidate variants were timed.
    public var candidates: Int

    package init(shape: String, tableSeconds: Double? = nil, bestSeconds: Double, clblastSeconds: Double? = nil, candidates: Int) {
        self.shape = shape; self.tableSeconds = tableSeconds; self.bestSeconds = bestSeconds
        self.clblastSeconds = clblastSeconds; self.candidates = candidates
    }
}

/// The kernel-tuning file in a cache folder: what `OpenCLBackend` reads its stored tuning from.
public struct KernelTuningStore: Sendable {
    /// The tuning file's name in the cache folder.
    public static let fileName = "kernel-tuning.json"
    /// Bumped when the tuning method or the variant format changes.
    public static let formatVersion = 1
    /// Set to `off` to ignore stored tunings (the table decides everywhere).
    public static let variable = "UPDRAFT_KERNEL_TUNING"

    /// The cache folder.
    public var directory: URL
    /// The store in `directory`.
    public init(directory: URL) { self.directory = directory }
    /// The store in the cache folder `environment` names (`CacheDirectory.url(environment:)`).
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.init(directory: CacheDirectory.url(environment: environment))
    }

    /// The tuning file: `kernel-tuning.json` in `directory`.
    public var fileURL: URL { directory.appendingPathComponent(Self.fileName) }

    private var file: CacheFile<KernelTuningEntry> { CacheFile(url: fileURL, format: Self.formatVersion, what: "the kernel tuning") }

    /// Every stored tuning; empty when the file is missing, unreadable, corrupt or of another format.
    public func load() -> [String: KernelTuningEntry] { file.load() }

    /// The stored tuning for `key`, if any.
    public func entry(_ key: String) -> KernelTuningEntry? { load()[key] }

    /// Adds or replaces one tuning (keeping the others), writing the file atomically.
    public func store(_ entry: KernelTuningEntry, key: String) throws {
        var entries = load()
        entries[key] = entry
        try file.write(entries)
    }

    /// The kernel sources a tuning depends on.
    static let tunedKernelFiles = ["gemm.cl", "gemm_core.h", "gemm_params.h", "gemm_reduce.cl", "convolution.cl", "im2col.cl"]

    /// FNV-1a (64-bit) of the tuned kernels' sources, in hex: a changed kernel invalidates its tunings.
    public static var kernelSourceHash: String {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for name in tunedKernelFiles {
            for byte in Array(name.utf8) + [0] + Array((EmbeddedKernels.sources[name] ?? "").utf8) + [0] {
                h = (h ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
            }
        }
        return String(h, radix: 16)
    }

    /// The key of an OpenCL device's kernel tuning: device name, driver version, kernel-source hash.
    public static func key(_ info: OpenCLDeviceInfo) -> String {
        CacheDirectory.key(kind: "opencl-kernels", name: "\(info.platformName): \(info.name)",
                           driverVersion: info.driverVersion) + "|kernels \(kernelSourceHash)"
    }
}

extension OpenCLTuning {
    /// This tuning with the variants stored for `info`'s device in `store` (none stored, or
    /// `UPDRAFT_KERNEL_TUNING=off`: unchanged, so the table decides).
    public func withStoredTuning(for info: OpenCLDeviceInfo, store: KernelTuningStore?,
                                 environment: [String: String] = ProcessInfo.processInfo.environment) -> OpenCLTuning {
        guard environment[KernelTuningStore.variable]?.lowercased() != "off", let store,
              let entry = store.entry(KernelTuningStore.key(info)) else { return self }
        var t = self
        // A stored tiling the device cannot run (hand-edited file) is dropped, not attempted.
        t.tuned = entry.variants.filter { $0.value.tiling.map { $0.fits(info) } ?? true }
        t.tunedSource = "\(store.fileURL.path) (\(entry.space), \(ISO8601DateFormatter().string(from: entry.measuredAt)))"
        return t
    }
}
