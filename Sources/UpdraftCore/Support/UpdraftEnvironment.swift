import Foundation

/// Updraft's `UPDRAFT_*` settings of a run, read once from an environment into types and handed down:
/// a run takes them from its configuration (`UpdateConfiguration.environment`), so a service or a test
/// sets them per task, and nothing deeper reads the process's environment for them. `variables` keeps
/// the whole environment for the parts that parse their own (the scheduler's `UPDRAFT_DEVICE` and
/// `UPDRAFT_DATA_PARALLEL`, the caches' folders and caps), which take it as an argument.
public struct UpdraftEnvironment: Sendable {
    /// The environment read.
    public var variables: [String: String]
    /// Prepare the devices before the first step (`UPDRAFT_PREPARE=off`: no, to measure what it saves).
    public var preparesDevices: Bool
    /// Run the frozen prefix's first layers a few images at a time on host-memory backends
    /// (`UPDRAFT_PREFIX_CHUNKS=off`: whole batches).
    public var chunksPrefix: Bool
    /// Send image batches as 8-bit samples, scaled on the device (`UPDRAFT_PIXEL_UPLOAD=off`: as floats).
    public var uploadsPixels: Bool

    /// The settings `variables` give (the process's environment by default).
    public init(_ variables: [String: String] = ProcessInfo.processInfo.environment) {
        self.variables = variables
        preparesDevices = variables["UPDRAFT_PREPARE"] != "off"
        chunksPrefix = variables["UPDRAFT_PREFIX_CHUNKS"] != "off"
        uploadsPixels = variables["UPDRAFT_PIXEL_UPLOAD"] != "off"
    }

    /// The process's, read once.
    public static let process = UpdraftEnvironment()
}
