import Foundation
import UpdraftCore
import UpdraftModel
import UpdraftPlacement
import UpdraftData

/// The scheduler's entry points for an `UpdateConfiguration` (what `ResolvedRun.resolve`, `updraft plan`
/// and `InferenceRunner` call): its compute units, device and data-parallel mode passed to the
/// placement walk in Scheduling/, which knows nothing of training configurations.
extension Scheduler {
    /// As `place`, within a configuration's compute units, device (`deviceOption`, else
    /// `preferredDevice`) and data-parallel mode.
    public static func place(graph: NetworkGraph, batchSize: Int, configuration: UpdateConfiguration,
                             environment: [String: String] = ProcessInfo.processInfo.environment,
                             cache: CalibrationCache? = nil) throws -> (plan: ExecutionPlan, warnings: [String]) {
        try place(graph: graph, batchSize: batchSize, computeUnits: configuration.placement.computeUnits,
                  deviceOption: configuration.placement.deviceOption, device: configuration.placement.preferredDevice,
                  environment: environment, cache: cache, dataParallel: configuration.placement.dataParallelMode, job: configuration.placement.job)
    }

    /// Plans `graph` at `batchSize` for this machine within a configuration's compute units, device
    /// and data-parallel mode, and opens the backends: what `ResolvedRun.resolve` does when the
    /// configuration gives no backends.
    public static func schedule(graph: NetworkGraph, batchSize: Int, configuration: UpdateConfiguration,
                                environment: [String: String] = ProcessInfo.processInfo.environment) throws -> MachineSchedule {
        let (plan, warnings) = try place(graph: graph, batchSize: batchSize, configuration: configuration, environment: environment)
        let backends = try Scheduler.backends(for: plan, opener: .system(environment: UpdraftEnvironment(environment)))
        return MachineSchedule(plan: plan, backends: backends, warnings: warnings + backends.warnings)
    }
}
