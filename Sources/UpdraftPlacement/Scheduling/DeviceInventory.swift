import Foundation
import UpdraftCore
import UpdraftBackends
import UpdraftModel

/// The devices this machine offers the scheduler: the host CPU and the OpenCL devices, and why
/// there are no OpenCL devices when there are none. `profiles(...)` calibrates the ones a run may
/// use (from the cache when they were measured before).
public struct DeviceInventory {
    /// The host CPU's name, core count and memory.
    public var host: HostInfo
    /// The OpenCL devices found, as `OpenCLRuntime.devices()` lists them; empty when OpenCL was not asked for or not available.
    public var openCL: [OpenCLDevice]
    /// Why `openCL` is empty (no platform, or an OpenCL error), or nil.
    public var openCLProblem: String?

    /// An inventory of the given devices (tests build one by hand; `discover` finds the real ones).
    public init(host: HostInfo, openCL: [OpenCLDevice], openCLProblem: String?) {
        self.host = host; self.openCL = openCL; self.openCLProblem = openCLProblem
    }

    /// Lists the devices. With `includeOpenCL` false (compute units cpuOnly) OpenCL is not touched.
    public static func discover(host: HostInfo = .current, includeOpenCL: Bool = true) -> DeviceInventory {
        guard includeOpenCL else { return DeviceInventory(host: host, openCL: [], openCLProblem: nil) }
        do {
            let devices = try OpenCLRuntime.devices()
            return DeviceInventory(host: host, openCL: devices,
                                   openCLProblem: devices.isEmpty ? "no OpenCL platform or device found" : nil)
        } catch {
            return DeviceInventory(host: host, openCL: [], openCLProblem: "OpenCL is unavailable: \(firstLine(of: error))")
        }
    }

    /// The pin a request names (see `DevicePin`), or nil without a request.
    public func resolvePin(_ request: DeviceRequest?) throws -> DevicePin? {
        try request?.resolve(openCLDevices: openCL.map { ($0.info.index, $0.info.name) }, openCLProblem: openCLProblem)
    }

    /// The pin text as typed names (`DeviceRequest.Value.text`, from `source`), or nil without it.
    public func resolvePin(_ typed: (text: String, source: String)?) throws -> DevicePin? {
        try resolvePin(typed.map { DeviceRequest(.text($0.text), source: $0.source) })
    }

    /// Calibrated devices for a plan, and one-line warnings about devices left out.
    public struct Setup {
        /// The devices the run may use, calibrated, host first.
        public var profiles: [DeviceProfile]
        /// One line per problem: OpenCL unavailable (planning with the CPU only), a device left out because its calibration failed, a calibration that could not be cached.
        public var warnings: [String]
    }

    /// The profiles of the devices a plan may use: only the pinned device when there is a pin
    /// (an error if `computeUnits` rules it out or it cannot be calibrated), else the host CPU and
    /// every OpenCL device `computeUnits` allows (a device that fails to calibrate is left out with a
    /// warning).
    public func profiles(computeUnits: ComputeUnits, pin: DevicePin?, cache: CalibrationCache?,
                         hostBackend: @autoclosure () -> Backend = Scheduler.makeHostBackend()) throws -> Setup {
        var warnings: [String] = []
        func host() throws -> DeviceProfile {
            let outcome = try DeviceCalibration.hostProfile(self.host, backend: hostBackend(), cache: cache)
            if let w = outcome.warning { warnings.append(w) }
            return outcome.profile
        }
        func calibrate(_ d: OpenCLDevice) throws -> DeviceProfile {
            let outcome = try DeviceCalibration.profile(of: d, cache: cache)
            if let w = outcome.warning { warnings.append(w) }
            return outcome.profile
        }
        switch pin {
        case .host?:
            return Setup(profiles: [try host()], warnings: warnings)
        case let .openCL(index)?:
            guard let device = openCL.first(where: { $0.info.index == index }) else {
                throw UpdraftError(.device, "OpenCL device #\(index) is not present", hint: "see `updraft devices`")
            }
            try computeUnits.checkPinned(device.info)
            do {
                return Setup(profiles: [try calibrate(device)], warnings: warnings)
            } catch {
                throw UpdraftError(.device, "cannot calibrate the pinned device #\(index) \(device.info.name): \(firstLine(of: error))",
                                   hint: "pin another device (see `updraft devices`) or cpu")
            }
        case nil:
            var profiles = [try host()]
            if computeUnits.usesOpenCL, let problem = openCLProblem {
                warnings.append("\(problem); planning with the CPU only")
            }
            for d in openCL where computeUnits.allows(openCLType: d.info.type) {
                do { profiles.append(try calibrate(d)) } catch {
                    warnings.append("leaving out #\(d.info.index) \(d.info.name): calibration failed: \(firstLine(of: error))")
                }
            }
            return Setup(profiles: profiles, warnings: warnings)
        }
    }
}

extension DeviceInventory {
    /// A plan for this machine: calibrates the devices `computeUnits` (or the pin) allows, then
    /// plans. Returns the plan and the warnings about devices left out.
    /// - Parameter pinSource: where the pin came from ("--device", "UPDRAFT_DEVICE"), noted in the plan.
    public func plan(graph: NetworkGraph, batchSize: Int, computeUnits: ComputeUnits, pin: DevicePin?,
                     pinSource: String? = nil, cache: CalibrationCache?,
                     options: Scheduler.Options = Scheduler.Options()) throws -> (plan: ExecutionPlan, warnings: [String]) {
        let setup = try profiles(computeUnits: computeUnits, pin: pin, cache: cache)
        var plan = try Scheduler.plan(graph: graph, batchSize: batchSize, computeUnits: computeUnits, devices: setup.profiles,
                                      options: options)
        if let pin {
            plan.notes.insert("device pinned by \(pinSource ?? "--device") to \(pin)", at: 0)
        }
        return (plan, setup.warnings)
    }
}
