import UpdraftCore
import UpdraftBackends

/// Turning a plan into backends for the executor.
/// How backends are opened: the real devices by default, anything in tests.
public struct BackendOpener {
    /// The host CPU backend.
    public var host: () throws -> Backend
    /// The backend of an OpenCL device described by a profile (its `openCLIndex` and `name`).
    public var openCL: (DeviceProfile) throws -> Backend

    /// An opener from two closures: one for the host CPU backend, one for an OpenCL device's profile.
    public init(host: @escaping () throws -> Backend, openCL: @escaping (DeviceProfile) throws -> Backend) {
        self.host = host; self.openCL = openCL
    }

    /// `Scheduler.makeHostBackend()` and `OpenCLBackend(device:)` on the device the profile names.
    public static var system: BackendOpener { system(environment: .process) }

    /// The real devices, the host backend made with a run's `UPDRAFT_*` settings.
    public static func system(environment: UpdraftEnvironment) -> BackendOpener {
        BackendOpener(host: { Scheduler.makeHostBackend(environment: environment) }, openCL: { profile in
            guard let index = profile.openCLIndex else {
                throw UpdraftError(.device, "\(profile.label) is not an OpenCL device")
            }
            let devices: [OpenCLDevice]
            do { devices = try OpenCLRuntime.devices() } catch {
                throw UpdraftError(.device, "OpenCL is unavailable: \(firstLine(of: error))")
            }
            if devices.isEmpty { throw UpdraftError(.device, "no OpenCL platform or device found") }
            // The index must still name the same device (drivers can come and go between runs).
            guard let device = devices.first(where: { $0.info.index == index && $0.info.name == profile.name }) else {
                throw UpdraftError(.device, "OpenCL device #\(index) \(profile.name) is not present")
            }
            return try OpenCLBackend(device: device)
        })
    }
}

/// The backends a plan runs on, and what had to change.
public struct ResolvedBackends {
    /// Runs the frozen prefix (forward only).
    public var prefix: Backend
    /// Runs the trainable tail. The same object as `prefix` when both parts share a device.
    public var tail: Backend
    /// One line per device that could not be used, naming the reason and the fallback taken.
    public var warnings: [String]
    /// Data-parallel replicas (two or more; `prefix` and `tail` are then the first), else empty.
    public var replicas: [Backend] = []
    /// Each replica's share of a mini-batch (the plan's slice sizes).
    public var shares: [Double] = []
    /// Whether prefix and tail run on different backends.
    public var isSplit: Bool { prefix !== tail }
    /// Whether mini-batches are split across two or more replicas.
    public var isDataParallel: Bool { replicas.count > 1 }

    /// "cpu", "<prefix> (frozen prefix) + <tail> (trainable tail)", or
    /// "data parallel: <a> (4) + <b> (4)".
    public var description: String {
        if isDataParallel {
            return "data parallel: " + zip(replicas, shares).map { "\($0.name) (\(Int($1)))" }.joined(separator: " + ")
        }
        return isSplit ? "\(prefix.name) (frozen prefix) + \(tail.name) (trainable tail)" : tail.name
    }
}

extension Scheduler {
    /// The host CPU backend: the fast `CPUBackend` (OpenBLAS). Calibration, plans and the
    /// executor all get the host backend here, so changing it is this one line.
    public static func makeHostBackend(environment: UpdraftEnvironment = .process) -> Backend {
        CPUBackend(environment: environment)
    }

    /// Opens the plan's devices: the host backend for the host, `OpenCLBackend` for OpenCL devices.
    /// A device that cannot be opened (OpenCL unavailable, device gone, context failure) is replaced
    /// by the host backend, with a one-line warning; nothing is printed. One device used for both
    /// parts is opened once.
    public static func backends(for plan: ExecutionPlan, opener: BackendOpener = .system) throws -> ResolvedBackends {
        var warnings: [String] = []
        var opened: [String: Backend] = [:]
        var hostBackend: Backend?
        func host() throws -> Backend {
            if let b = hostBackend { return b }
            let b = try opener.host()
            hostBackend = b
            return b
        }
        func open(_ device: DeviceProfile, role: String) throws -> Backend {
            if let b = opened[device.identifier] { return b }
            let backend: Backend
            if device.isHost {
                backend = try host()
            } else {
                do {
                    backend = try opener.openCL(device)
                } catch {
                    let fallback = try host()
                    warnings.append("cannot use \(device.label) for the \(role): \(firstLine(of: error)); "
                                    + "falling back to the CPU backend (\(fallback.name))")
                    backend = fallback
                }
            }
            opened[device.identifier] = backend
            return backend
        }
        if let dp = plan.dataParallel {
            // Each replica on its own device; one that cannot be opened is left out (the host backend
            // is already a replica or the fallback, so it does not stand in for it).
            var replicas: [Backend] = [], shares: [Double] = []
            for (device, slice) in zip(dp.devices, dp.slices) {
                do {
                    let b = device.isHost ? try host() : try opener.openCL(device)
                    replicas.append(b)
                    shares.append(Double(slice))
                } catch {
                    warnings.append("cannot use \(device.label) as a data-parallel replica: \(firstLine(of: error)); leaving it out")
                }
            }
            if replicas.count > 1 {
                return ResolvedBackends(prefix: replicas[0], tail: replicas[0], warnings: warnings, replicas: replicas, shares: shares)
            }
            let one = try replicas.first ?? host()
            return ResolvedBackends(prefix: one, tail: one, warnings: warnings)
        }
        let bothParts = !plan.isSplit
        let prefix = try open(plan.prefixDevice, role: bothParts ? "whole model" : "frozen prefix")
        let tail = try open(plan.tailDevice, role: "trainable tail")
        return ResolvedBackends(prefix: prefix, tail: tail, warnings: warnings)
    }
}
