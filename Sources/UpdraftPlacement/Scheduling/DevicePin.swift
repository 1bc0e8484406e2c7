import Foundation
import UpdraftCore

/// A device the user named (`--device`, or the `UPDRAFT_DEVICE` environment variable): the whole
/// model then runs there, whatever the scheduler would have chosen.
///
/// Accepted spellings: "cpu" (or "host") for the host CPU backend; an OpenCL device's index (the `#`
/// column of `updraft devices`); or a case-insensitive part of an OpenCL device's name, which must
/// pick out one device (a full name that matches exactly wins over partial matches). Under mpirun a
/// comma-separated list gives each rank on a host its entry (`RankDeviceChoice`); a single process refuses one.
public enum DevicePin: Hashable, Sendable, CustomStringConvertible {
    /// The host CPU backend ("cpu" or "host").
    case host
    /// An OpenCL device, by its index in `updraft devices` (the `#` column).
    case openCL(index: Int)

    /// The environment variable read when no `--device` or `preferredDevice` is given.
    public static let environmentVariable = "UPDRAFT_DEVICE"

    /// "cpu" or "opencl:N", the device's `DeviceProfile.identifier`.
    public var description: String {
        switch self {
        case .host: return "cpu"
        case let .openCL(i): return "opencl:\(i)"
        }
    }

    /// Whether a profile describes the pinned device.
    public func matches(_ profile: DeviceProfile) -> Bool {
        switch self {
        case .host: return profile.isHost
        case let .openCL(i): return profile.openCLIndex == i
        }
    }

    /// The device asked for and where the ask came from: the option (text, as typed) wins over a
    /// typed pin (Swift's `preferredDevice`), which wins over the environment (text).
    public static func request(option: String?, pin: DevicePin? = nil,
                               environment: [String: String] = ProcessInfo.processInfo.environment) -> DeviceRequest? {
        if let option, !option.isEmpty { return DeviceRequest(.text(option), source: "--device") }
        if let pin { return DeviceRequest(.pin(pin), source: "preferredDevice") }
        if let env = environment[environmentVariable], !env.trimmingCharacters(in: .whitespaces).isEmpty {
            return DeviceRequest(.text(env), source: environmentVariable)
        }
        return nil
    }

    /// Resolves `text` against the OpenCL devices present (index and name each).
    /// - Parameters:
    ///   - openCLProblem: why there are no OpenCL devices, for the error message.
    ///   - source: where the text came from ("--device", "UPDRAFT_DEVICE"), for the error message.
    public static func resolve(_ text: String, openCLDevices: [(index: Int, name: String)],
                               openCLProblem: String? = nil, source: String = "--device") throws -> DevicePin {
        let wanted = text.trimmingCharacters(in: .whitespaces)
        let lower = wanted.lowercased()
        if lower == "cpu" || lower == "host" { return .host }
        if wanted.contains(",") {
            throw UpdraftError(.invalidArgument, "\(source) '\(wanted)' is a list: a list gives each rank of an mpirun job on a host its device (local rank i takes entry i mod count), and this run is one process",
                               hint: "name one device, or run under mpirun")
        }
        func unknown(_ what: String) -> UpdraftError {
            var listed = ["cpu (the host CPU backend)"] + openCLDevices.map { "\($0.index) (\($0.name))" }
            if openCLDevices.isEmpty { listed.append("no OpenCL devices" + (openCLProblem.map { ": \($0)" } ?? "")) }
            return UpdraftError(.invalidArgument, "\(source) \(what); the devices are: \(listed.joined(separator: ", "))",
                                hint: "pass an index or a part of a name from `updraft devices`, or cpu")
        }
        if let index = Int(wanted) {
            guard openCLDevices.contains(where: { $0.index == index }) else {
                throw unknown("names OpenCL device #\(index), which does not exist")
            }
            return .openCL(index: index)
        }
        guard !lower.isEmpty else { throw unknown("is empty") }
        let exact = openCLDevices.filter { $0.name.lowercased() == lower }
        if exact.count == 1 { return .openCL(index: exact[0].index) }
        let matches = openCLDevices.filter { $0.name.lowercased().contains(lower) }
        if matches.count == 1 { return .openCL(index: matches[0].index) }
        if matches.isEmpty { throw unknown("'\(wanted)' matches no device") }
        throw UpdraftError(.invalidArgument,
            "\(source) '\(wanted)' matches \(matches.count) devices: "
                + matches.map { "\($0.index) (\($0.name))" }.joined(separator: ", "),
            hint: "pass the device's index instead")
    }

    /// Resolves `text` against described devices (the host profile answers to "cpu").
    public static func resolve(_ text: String, among devices: [DeviceProfile], source: String = "--device") throws -> DevicePin {
        let openCL = devices.compactMap { d in d.openCLIndex.map { (index: $0, name: d.name) } }
        let pin = try resolve(text, openCLDevices: openCL, source: source)
        if pin == .host, !devices.contains(where: \.isHost) {
            throw UpdraftError(.invalidArgument, "\(source) asks for the host CPU, which is not among the devices")
        }
        return pin
    }
}

/// A device asked for: a typed pin, or text as a user typed it (`--device`, `UPDRAFT_DEVICE`: an index,
/// part of a name, cpu, or under mpirun a list), with where it came from for messages. A typed pin is
/// never turned into text and parsed again; text is resolved once, against the devices present.
public struct DeviceRequest: Sendable, Equatable {
    public enum Value: Sendable, Equatable {
        case pin(DevicePin)
        case text(String)
    }
    public var value: Value
    /// "--device", "preferredDevice" or "UPDRAFT_DEVICE".
    public var source: String

    public init(_ value: Value, source: String) { self.value = value; self.source = source }

    /// The request as a user would type it ("cpu", "1", "NVIDIA"), for messages.
    public var text: String {
        switch value {
        case let .pin(pin): return pin.optionText
        case let .text(text): return text
        }
    }

    /// The pin among the OpenCL devices present: a typed one checked to exist, text resolved.
    public func resolve(openCLDevices: [(index: Int, name: String)], openCLProblem: String? = nil) throws -> DevicePin {
        switch value {
        case .pin(.host): return .host
        case let .pin(.openCL(index)) where openCLDevices.contains(where: { $0.index == index }): return .openCL(index: index)
        case .pin: return try DevicePin.resolve(text, openCLDevices: openCLDevices, openCLProblem: openCLProblem, source: source)
        case let .text(text): return try DevicePin.resolve(text, openCLDevices: openCLDevices, openCLProblem: openCLProblem, source: source)
        }
    }
}
