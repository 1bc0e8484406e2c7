import Foundation
import UpdraftModel

/// The whole path a command takes to run a graph on this machine, in one call: list the devices,
/// resolve a pin (`--device` or `UPDRAFT_DEVICE`), calibrate (cached), plan, open the backends.
public struct MachineSchedule {
    /// Where each layer runs and the estimated times (print it with `text()` or `json()`).
    public var plan: ExecutionPlan
    /// The opened backends the executor runs on, with the fallbacks already taken.
    public var backends: ResolvedBackends
    /// One line each: devices left out, OpenCL missing, fallbacks taken. Print them; nothing here did.
    public var warnings: [String]

    package init(plan: ExecutionPlan, backends: ResolvedBackends, warnings: [String]) {
        self.plan = plan; self.backends = backends; self.warnings = warnings
    }

    /// "cpu", "opencl:<name>", "<prefix> (frozen prefix) + <tail> (trainable tail)", or
    /// "data parallel: <a> (n) + <b> (m)".
    public var description: String { backends.description }
}

extension Scheduler {
    /// Plans `graph` at `batchSize` for this machine, without opening any backend: the devices
    /// within `computeUnits`, a pin, calibration (cached) and the plan. `schedule` opens what this
    /// chose; `updraft plan` prints it.
    /// - Parameters:
    ///   - deviceOption: the `--device` value, if given; `UPDRAFT_DEVICE` in `environment` otherwise.
    ///   - cache: where calibrations are kept (default: `CalibrationCache(environment:)`).
    ///   - dataParallel: the `--data-parallel` mode, if given; `UPDRAFT_DATA_PARALLEL` in
    ///     `environment` otherwise; `auto` without either.
    /// - Throws: for a pin that names no device or one `computeUnits` rules out; never for missing
    ///   OpenCL, which leaves a CPU plan and a warning.
    public static func place(graph: NetworkGraph, batchSize: Int, computeUnits: ComputeUnits = .default,
                             deviceOption: String? = nil,
                             environment: [String: String] = ProcessInfo.processInfo.environment,
                             cache: CalibrationCache? = nil,
                             dataParallel: DataParallelMode? = nil) throws -> (plan: ExecutionPlan, warnings: [String]) {
        let mode = try DataParallelMode.resolve(option: dataParallel?.rawValue, environment: environment)
        let request = DevicePin.request(option: deviceOption, environment: environment)
        let inventory = DeviceInventory.discover(includeOpenCL: computeUnits.usesOpenCL || request != nil)
        let pin = try inventory.resolvePin(request)
        return try inventory.plan(graph: graph, batchSize: batchSize, computeUnits: computeUnits, pin: pin,
                                  pinSource: request?.source,
                                  cache: cache ?? CalibrationCache(environment: environment),
                                  options: Scheduler.Options(dataParallel: mode))
    }

    /// Plans `graph` at `batchSize` for this machine (`place`) and opens the backends.
    /// - Parameters:
    ///   - dataParallel: the `--data-parallel` value (any case), if given; `UPDRAFT_DATA_PARALLEL` in
    ///     `environment` otherwise; `auto` without either.
    /// - Throws: as `place`, and for a `dataParallel` value that names no mode.
    public static func schedule(graph: NetworkGraph, batchSize: Int, computeUnits: ComputeUnits = .default,
                                deviceOption: String? = nil,
                                environment: [String: String] = ProcessInfo.processInfo.environment,
                                cache: CalibrationCache? = nil, dataParallel: String? = nil) throws -> MachineSchedule {
        let mode = try dataParallel.map(DataParallelMode.init(parsing:))
        let (plan, warnings) = try place(graph: graph, batchSize: batchSize, computeUnits: computeUnits, deviceOption: deviceOption,
                                         environment: environment, cache: cache, dataParallel: mode)
        let backends = try Scheduler.backends(for: plan)
        return MachineSchedule(plan: plan, backends: backends, warnings: warnings + backends.warnings)
    }
}

extension DevicePin {
    /// How `--device` spells this pin: "cpu", or an OpenCL device's index.
    public var optionText: String {
        switch self {
        case .host: return "cpu"
        case let .openCL(index): return "\(index)"
        }
    }
}
