import Foundation

/// The folder where Updraft keeps what it measured on this machine: device calibrations
/// (`CalibrationCache`, Scheduling/) and kernel tunings (`KernelTuningStore`, Backends/OpenCL/).
public enum CacheDirectory {
    /// The environment variable that names the folder.
    public static let variable = "UPDRAFT_CACHE_DIR"

    /// The folder for `environment`: `$UPDRAFT_CACHE_DIR`, else `$XDG_CACHE_HOME/updraft`, else `$HOME/.cache/updraft`.
    public static func url(environment: [String: String]) -> URL {
        if let dir = environment[variable], !dir.isEmpty { return URL(fileURLWithPath: dir, isDirectory: true) }
        if let xdg = environment["XDG_CACHE_HOME"], !xdg.isEmpty {
            return URL(fileURLWithPath: xdg, isDirectory: true).appendingPathComponent("updraft", isDirectory: true)
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return URL(fileURLWithPath: home, isDirectory: true).appendingPathComponent(".cache/updraft", isDirectory: true)
    }

    /// The key of one device's entry in a cache file: what was measured, the device, its driver.
    public static func key(kind: String, name: String, driverVersion: String) -> String {
        "\(kind)|\(name)|\(driverVersion)"
    }
}

/// One JSON file in the cache folder holding entries by key, `{"format": N, "devices": {key: entry}}`:
/// read leniently (a missing, unreadable, corrupt or other-format file is empty), written whole
/// and atomically. The calibration cache and the kernel-tuning store are two of them.
package struct CacheFile<Entry: Codable> {
    /// The file.
    var url: URL
    /// The format it is written in; a file of another format reads as empty.
    var format: Int
    /// What the file holds, for the error when it cannot be written ("the calibration cache").
    var what: String

    package init(url: URL, format: Int, what: String) {
        self.url = url; self.format = format; self.what = what
    }

    private struct Contents: Codable {
        var format: Int
        var devices: [String: Entry]
    }

    /// Every entry; empty when the file is missing, unreadable, corrupt or of another format.
    package func load() -> [String: Entry] {
        guard let data = try? Data(contentsOf: url) else { return [:] }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        guard let file = try? decoder.decode(Contents.self, from: data), file.format == format else { return [:] }
        return file.devices
    }

    /// Writes `entries` as the whole file, creating its folder, atomically.
    package func write(_ entries: [String: Entry]) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        do {
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try encoder.encode(Contents(format: format, devices: entries)).write(to: url, options: .atomic)
        } catch {
            throw UpdraftError(.io, "cannot write \(what) \(url.path): \(error.localizedDescription)",
                               hint: "set \(CacheDirectory.variable) to a writable folder")
        }
    }
}

/// The first line of an error's description (for one-line warnings).
package func firstLine(of error: Error) -> String {
    String(describing: error).split(separator: "\n", omittingEmptySubsequences: true).first.map(String.init) ?? "\(error)"
}
