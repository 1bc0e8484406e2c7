import Foundation

/// The whole path a command takes to run a graph on this machine, in one call: list the devices,
/// resolve a pin (`--device` or `UPDRAFT_DEVICE`), calibrate (cached), plan, open the backends.
public struct MachineSchedule {
    /// Where each layer runs and the estimated times (print it with `text()` or `json()`).
    public var plan: ExecutionPlan
    /// The opened backends the executor runs on, with the fallbacks already taken.
    public var backends: ResolvedBackends
    /// One line each: devices left out, OpenCL missing, fallbacks taken. Print them; nothing here did.
    public var warnings: [String]

    /// "cpu", "opencl:<name>", "<prefix> (frozen prefix) + <tail> (trainable tail)", or
    /// "data parallel: <a> (n) + <b> (m)".
    public var description: String { backends.description }
}

extension Scheduler {
    /// Plans `graph` at `batchSize` for this machine and opens the backends.
    /// - Parameters:
    ///   - deviceOption: the `--device` value, if given; `UPDRAFT_DEVICE` in `environment` otherwise.
    ///   - cache: where calibrations are kept (default: `CalibrationCache(environment:)`).
    ///   - dataParallel: the `--data-parallel` value, if given; `UPDRAFT_DATA_PARALLEL` in
    ///     `environment` otherwise; `auto` without either.
    /// - Throws: for a pin that names no device or one `computeUnits` rules out; never for missing
    ///   OpenCL, which leaves a CPU plan and a warning.
    public static func schedule(graph: NetworkGraph, batchSize: Int, computeUnits: ComputeUnits = .default,
                                deviceOption: String? = nil,
                                environment: [String: String] = ProcessInfo.processInfo.environment,
                                cache: CalibrationCache? = nil, dataParallel: String? = nil) throws -> MachineSchedule {
        let mode = try DataParallelMode.resolve(option: dataParallel, environment: environment)
        let request = DevicePin.request(option: deviceOption, environment: environment)
        let inventory = DeviceInventory.discover(includeOpenCL: computeUnits.usesOpenCL || request != nil)
        let pin = try inventory.resolvePin(request)
        let (plan, warnings) = try inventory.plan(graph: graph, batchSize: batchSize, computeUnits: computeUnits, pin: pin,
                                                  pinSource: request?.source,
                                                  cache: cache ?? CalibrationCache(environment: environment),
                                                  options: Scheduler.Options(dataParallel: mode))
        let backends = try Scheduler.backends(for: plan)
        return MachineSchedule(plan: plan, backends: backends, warnings: warnings + backends.warnings)
    }

    /// Plans `graph` at `batchSize` for this machine within a configuration's compute units, pinned
    /// device and data-parallel mode: what `UpdateTask` does when it is given no backends.
    public static func schedule(graph: NetworkGraph, batchSize: Int, configuration: UpdateConfiguration,
                                environment: [String: String] = ProcessInfo.processInfo.environment) throws -> MachineSchedule {
        try schedule(graph: graph, batchSize: batchSize, computeUnits: configuration.computeUnits,
                     deviceOption: configuration.preferredDevice?.optionText, environment: environment,
                     dataParallel: configuration.dataParallelMode?.rawValue)
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
