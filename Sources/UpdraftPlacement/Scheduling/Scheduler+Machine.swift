import Foundation
import UpdraftBackends
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
    ///   - deviceOption: the `--device` value, if given; else `device` (typed); `UPDRAFT_DEVICE` in
    ///     `environment` otherwise.
    ///   - cache: where calibrations are kept (default: `CalibrationCache(environment:)`).
    ///   - dataParallel: the `--data-parallel` mode, if given; `UPDRAFT_DATA_PARALLEL` in
    ///     `environment` otherwise; `auto` without either.
    /// - Throws: for a pin that names no device or one `computeUnits` rules out; never for missing
    ///   OpenCL, which leaves a CPU plan and a warning.
    public static func place(graph: NetworkGraph, batchSize: Int, computeUnits: ComputeUnits = .default,
                             deviceOption: String? = nil, device: DevicePin? = nil,
                             environment: [String: String] = ProcessInfo.processInfo.environment,
                             cache: CalibrationCache? = nil,
                             dataParallel: DataParallelMode? = nil, job: Job? = nil) throws -> (plan: ExecutionPlan, warnings: [String]) {
        let mode = try DataParallelMode.resolve(dataParallel, environment: environment)
        let request = DevicePin.request(option: deviceOption, pin: device, environment: environment)
        let calibration = cache ?? CalibrationCache(environment: environment)
        var options = Scheduler.Options(dataParallel: mode)
        options.job = job
        let programs = ProgramBinaryCache.standard(environment: environment)
        // Not when data parallelism is forced: the user asked for every device.
        if computeUnits.usesOpenCL, request == nil, mode != .on, let job {
            // A job the CPU finishes before any OpenCL device could start never loads a driver: the plan
            // without OpenCL (the host's, under the compute units asked for) is then the plan.
            var hostOnly = try DeviceInventory.discover(includeOpenCL: false)
                .plan(graph: graph, batchSize: batchSize, computeUnits: computeUnits, pin: nil, cache: calibration, options: options)
            let start = openCLStartSeconds(graph: graph, batchSize: batchSize, calibration: calibration, programs: programs)
            if let jobMs = hostOnly.plan.jobMs, jobMs * 1e-3 < start.seconds {
                hostOnly.plan.notes.insert("OpenCL left closed: the whole job (\(job)) takes about \(ExecutionPlan.ms(jobMs)) ms on the CPU, "
                                           + "less than the \(ExecutionPlan.ms(start.seconds * 1e3)) ms \(start.source)", at: 0)
                return hostOnly
            }
        }
        let inventory = DeviceInventory.discover(includeOpenCL: computeUnits.usesOpenCL || request != nil)
        let pin = try inventory.resolvePin(request)
        if let programs {
            for d in inventory.openCL {
                options.cachedPrograms["opencl:\(d.info.index)"] = programs.entries(forDevice: d.info.name, driverVersion: d.info.driverVersion)
            }
        }
        return try inventory.plan(graph: graph, batchSize: batchSize, computeUnits: computeUnits, pin: pin,
                                  pinSource: request?.source, cache: calibration, options: options)
    }

    /// The least an OpenCL device of this machine needs before its first batch of `graph`: the
    /// cheapest calibrated device's context and programs, all from the binary cache (a lower bound),
    /// or `defaultOpenCLStartSeconds` when no device was calibrated yet. With where the figure came from.
    static func openCLStartSeconds(graph: NetworkGraph, batchSize: Int, calibration: CalibrationCache,
                                   programs: ProgramBinaryCache?) -> (seconds: Double, source: String) {
        let stored = calibration.load().filter { $0.key.hasPrefix("opencl|") }.map(\.value)
        guard !stored.isEmpty, let analysis = try? GraphAnalysis(graph: graph, batch: batchSize) else {
            return (defaultOpenCLStartSeconds, "an OpenCL device needs at least to start (a driver, a context, its programs)")
        }
        let count = analysis.programCount([.prefix, .tail])
        let cheapest = stored.map { $0.setupSeconds(programs: count, cached: programs == nil ? 0 : count) }.min() ?? defaultOpenCLStartSeconds
        return (cheapest, "the fastest calibrated OpenCL device needs at the least to start (its context and \(count) programs\(programs == nil ? ", built" : ", all loaded from the program cache"))")
    }

    /// Plans `graph` at `batchSize` for this machine (`place`) and opens the backends.
    /// - Parameters:
    ///   - dataParallel: the data-parallel mode, if given; `UPDRAFT_DATA_PARALLEL` in `environment`
    ///     otherwise; `auto` without either.
    /// - Throws: as `place`.
    public static func schedule(graph: NetworkGraph, batchSize: Int, computeUnits: ComputeUnits = .default,
                                deviceOption: String? = nil, device: DevicePin? = nil,
                                environment: [String: String] = ProcessInfo.processInfo.environment,
                                cache: CalibrationCache? = nil, dataParallel: DataParallelMode? = nil,
                                job: Job? = nil) throws -> MachineSchedule {
        let (plan, warnings) = try place(graph: graph, batchSize: batchSize, computeUnits: computeUnits, deviceOption: deviceOption,
                                         device: device, environment: environment, cache: cache, dataParallel: dataParallel, job: job)
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
