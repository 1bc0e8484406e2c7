import Foundation

/// Updraft's `UPDRAFT_*` settings of a run, read once from an environment into types and handed down:
/// a run takes them from its configuration (`UpdateConfiguration.environment`), so a service or a test
/// sets them per task, and nothing deeper reads the process's environment for them. `variables` keeps
/// the whole environment for the parts that parse their own (the scheduler's `UPDRAFT_DEVICE` and
/// `UPDRAFT_DATA_PARALLEL`, the caches' folders and caps), which take it as an argument. One setting
/// stays per process: `UPDRAFT_CPU_LEVEL`, the instruction set the C kernels' table is chosen for when
/// it is first used (`CUpdraftKernels`).
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
    /// Worker threads of a CPU backend made without a count (`UPDRAFT_CPU_THREADS`, 1 to 1024; else
    /// the cores this process may use).
    public var cpuThreads: Int
    /// Why `UPDRAFT_CPU_THREADS` was not used, when it was set to something that is not a thread count.
    public var cpuThreadsWarning: String?
    /// The algorithm every CPU 3x3 convolution runs (`UPDRAFT_WINOGRAD`: off is im2col, 2x2 or 4x4 a
    /// Winograd tile); nil: the backend's rule or stored tuning.
    public var winograd: WinogradSetting?
    /// `UPDRAFT_ONEDNN`: `.on` runs every convolution, pooling and inner product oneDNN implements on
    /// it; `.off` ignores stored CPU tunings; nil: the stored tuning, else the built-in rule.
    public var oneDNN: OneDNNSetting?
    /// Let oneDNN pick blocked memory layouts (`UPDRAFT_ONEDNN_LAYOUT=plain`: plain NCHW only).
    public var oneDNNBlockedLayouts: Bool

    /// `UPDRAFT_WINOGRAD`'s values.
    public enum WinogradSetting: String, Sendable { case off, f2x2 = "2x2", f4x4 = "4x4" }
    /// `UPDRAFT_ONEDNN`'s values.
    public enum OneDNNSetting: String, Sendable { case on, off }

    /// The settings `variables` give (the process's environment by default).
    public init(_ variables: [String: String] = ProcessInfo.processInfo.environment) {
        self.variables = variables
        preparesDevices = variables["UPDRAFT_PREPARE"] != "off"
        chunksPrefix = variables["UPDRAFT_PREFIX_CHUNKS"] != "off"
        uploadsPixels = variables["UPDRAFT_PIXEL_UPLOAD"] != "off"
        (cpuThreads, cpuThreadsWarning) = HostInfo.cpuThreads(environment: variables, usable: HostInfo.usableCores)
        winograd = variables["UPDRAFT_WINOGRAD"].flatMap(WinogradSetting.init(rawValue:))
        oneDNN = variables["UPDRAFT_ONEDNN"].flatMap(OneDNNSetting.init(rawValue:))
        oneDNNBlockedLayouts = variables["UPDRAFT_ONEDNN_LAYOUT"] != "plain"
    }

    /// The process's, read once (a bad `UPDRAFT_CPU_THREADS` is warned about then, on standard error).
    public static let process: UpdraftEnvironment = {
        let environment = UpdraftEnvironment()
        if let warning = environment.cpuThreadsWarning { FileHandle.standardError.write(Data("warning: \(warning)\n".utf8)) }
        return environment
    }()
}
