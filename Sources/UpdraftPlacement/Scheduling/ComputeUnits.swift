import UpdraftCore
import UpdraftBackends

/// Which kinds of device a run may use, after Core ML's `MLComputeUnits`. The host CPU is always
/// allowed; the setting only widens the set of OpenCL devices the scheduler may choose from.
///
/// - `cpuOnly`: the host CPU backend only; OpenCL is never touched.
/// - `cpuAndGPU`: the host CPU and OpenCL GPU devices.
/// - `all`: the host CPU and every OpenCL device: GPUs, accelerators and OpenCL CPU devices such as
///   PoCL. This is Core ML's default, and Updraft's.
public enum ComputeUnits: String, CaseIterable, Codable, Sendable {
    /// MLComputeUnits' `.cpuOnly`, `.cpuAndGPU` and `.all`, with the meanings listed above.
    case cpuOnly, cpuAndGPU, all

    /// Core ML's default.
    public static let `default` = ComputeUnits.all

    /// The command-line spellings, in the order they widen: "cpuOnly", "cpuAndGPU", "all".
    public static var choices: [String] { allCases.map(\.rawValue) }

    /// Parses a command-line value (exact Core ML spelling, or the same letters in any case).
    public init(parsing text: String) throws {
        if let exact = ComputeUnits(rawValue: text) { self = exact; return }
        if let loose = ComputeUnits.allCases.first(where: { $0.rawValue.lowercased() == text.lowercased() }) {
            self = loose; return
        }
        throw UpdraftError(.invalidArgument, "unknown compute units '\(text)'",
                           hint: "use one of \(ComputeUnits.choices.joined(separator: ", "))")
    }

    /// Whether a device of this description may run layers under this setting.
    public func allows(_ device: DeviceProfile) -> Bool {
        if device.isHost { return true }
        switch self {
        case .cpuOnly: return false
        case .cpuAndGPU: return device.kind == .gpu
        case .all: return true
        }
    }

    /// Whether this setting may use OpenCL at all (so discovery and calibration can skip it).
    public var usesOpenCL: Bool { self != .cpuOnly }

    /// Whether an OpenCL device of this type may run layers under this setting.
    public func allows(openCLType type: OpenCLDeviceType) -> Bool {
        switch self {
        case .cpuOnly: return false
        case .cpuAndGPU: return type == .gpu
        case .all: return true
        }
    }

    /// Throws, naming the device and the way out, when this setting rules out the pinned OpenCL device `device`.
    public func checkPinned(_ device: OpenCLDeviceInfo) throws {
        guard !allows(openCLType: device.type) else { return }
        throw UpdraftError(.invalidArgument,
            "the pinned device #\(device.index) \(device.name) is an OpenCL \(device.type.rawValue) device, "
                + "which compute units \(rawValue) do not allow",
            hint: self == .cpuOnly ? "drop --compute-units cpuOnly, or pin cpu" : "use --compute-units all, or pin another device")
    }
}
