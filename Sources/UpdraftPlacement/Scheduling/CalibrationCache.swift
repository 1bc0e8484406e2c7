import Foundation
import UpdraftCore

/// Device measurements kept on disk so each device is calibrated once: one JSON file,
/// `calibration.json`, in `$UPDRAFT_CACHE_DIR`, else `$XDG_CACHE_HOME/updraft`, else
/// `~/.cache/updraft`. Entries are keyed by what the measurement depends on (device name, driver
/// version, calibration method), so a new driver or a new host backend is measured afresh. A file
/// that cannot be read or decoded is ignored and rewritten on the next store.
public struct CalibrationCache: Sendable {
    /// Bumped when the calibration method changes, which invalidates every stored entry
    /// (2: devices' set-up costs, context and program builds, are measured).
    public static let formatVersion = 2
    /// The calibration file's name in `directory`.
    public static let fileName = "calibration.json"
    /// Environment variable naming the cache folder; wins over `XDG_CACHE_HOME` and `~/.cache/updraft`.
    public static let directoryVariable = CacheDirectory.variable

    /// The folder holding `calibration.json` and `kernel-tuning.json`; created on the first store.
    public var directory: URL
    /// The calibration file: `calibration.json` in `directory`.
    public var fileURL: URL { directory.appendingPathComponent(Self.fileName) }

    /// A cache in `directory` (nothing is read or created yet).
    public init(directory: URL) { self.directory = directory }

    /// The cache in its default place for this environment.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.init(directory: Self.defaultDirectory(environment: environment))
    }

    /// Where the cache lives for `environment`: `$UPDRAFT_CACHE_DIR`, else `$XDG_CACHE_HOME/updraft`, else `$HOME/.cache/updraft`.
    public static func defaultDirectory(environment: [String: String]) -> URL { CacheDirectory.url(environment: environment) }

    /// The key of a device's entry.
    public static func key(kind: String, name: String, driverVersion: String) -> String {
        CacheDirectory.key(kind: kind, name: name, driverVersion: driverVersion)
    }

    struct Entry: Codable {
        var profile: DeviceProfile
        var measuredAt: Date
    }

    private var file: CacheFile<Entry> { CacheFile(url: fileURL, format: Self.formatVersion, what: "the calibration cache") }

    /// Every stored entry; empty when the file is missing, unreadable, corrupt or of another format.
    public func load() -> [String: DeviceProfile] { loadFile().mapValues(\.profile) }

    func loadFile() -> [String: Entry] { file.load().filter { $0.value.profile.isUsable } }

    /// The stored profile for `key`, if any.
    public func lookup(_ key: String) -> DeviceProfile? { loadFile()[key]?.profile }

    /// Adds or replaces one entry (keeping the others that decode), writing the file atomically.
    public func store(_ profile: DeviceProfile, key: String) throws {
        var entries = loadFile()
        entries[key] = Entry(profile: profile, measuredAt: Date())
        try file.write(entries)
    }

    /// The result of `profile(key:measure:)`.
    public struct Outcome: Sendable {
        /// The device's measured (or cached) profile.
        public var profile: DeviceProfile
        /// Whether the profile came from the cache (no measurement ran).
        public var cached: Bool
        /// Set when the measurement could not be stored (the profile is still good).
        public var warning: String?
    }

    /// The cached profile for `key`, or a fresh measurement, which is then stored. Tasks starting
    /// at once in one process measure a device once: the look-up, measurement and store run under
    /// a process-wide lock, and a measurement that could not be stored is kept for the process, so
    /// every task schedules from the same profile (never from timings taken while others train).
    public func profile(key: String, measure: () throws -> DeviceProfile) throws -> Outcome {
        Self.measuring.lock(); defer { Self.measuring.unlock() }
        if let p = lookup(key) { return Outcome(profile: p, cached: true, warning: nil) }
        let memoKey = fileURL.path + "\n" + key
        if let p = Self.unstored[memoKey] { return Outcome(profile: p, cached: true, warning: nil) }
        let measured = try measure()
        guard measured.isUsable else {
            throw UpdraftError(.device, "calibrating \(measured.name) gave unusable numbers (\(measured))",
                               hint: "run again; if it persists, pin another device with --device")
        }
        do {
            try store(measured, key: key)
            return Outcome(profile: measured, cached: false, warning: nil)
        } catch {
            Self.unstored[memoKey] = measured
            return Outcome(profile: measured, cached: false,
                           warning: "calibration of \(measured.name) not cached: \(firstLine(of: error))")
        }
    }

    /// Held by `profile(key:measure:)` from look-up to store.
    private static let measuring = NSLock()
    /// Measurements this process could not store, by cache file and key; guarded by `measuring`.
    nonisolated(unsafe) private static var unstored: [String: DeviceProfile] = [:]
}
