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

/// The first line of an error's description (for one-line warnings).
func firstLine(of error: Error) -> String {
    String(describing: error).split(separator: "\n", omittingEmptySubsequences: true).first.map(String.init) ?? "\(error)"
}
