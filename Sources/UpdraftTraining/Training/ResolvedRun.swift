import Foundation
import UpdraftCore
import UpdraftModel
import UpdraftPlacement
import UpdraftData

/// A training run resolved from a model and an `UpdateConfiguration`, once: the hyperparameters
/// (the model's defaults with the configuration's overrides, or a checkpoint's), validated here and
/// nowhere else; the checkpoint the run continues; where it runs (the scheduler's plan and opened
/// backends, or the backends the configuration gives); and a report of what was chosen.
///
/// `UpdateTask(run:trainingData:handlers:)` trains it as resolved; `UpdateTask(model:...)`
/// resolves its configuration the same way when it starts. `updraft train` and
/// `updraft-bench epochs` resolve through `resolve`, `updraft plan` through `plan` (`RunPlan.swift`),
/// which places as `resolve` does (`place`) without opening anything, so every caller gets the
/// same plan for the same settings.
public struct ResolvedRun {
    /// The model the run trains.
    public let model: CoreMLModel
    /// The model's network; nil for a kind that runs none (a bare k-NN, which appends samples).
    public let graph: NetworkGraph?
    /// The hyperparameters in force at the start, checked against what the model allows.
    public let parameters: TrainingParameters
    /// The configuration the run trains with: the one given, with `backends` (and `dataParallel`,
    /// when mini-batches are split across devices) set to where the run was scheduled. Settings
    /// that do not decide the plan (augmentation, checkpoints, the feature cache, ...) may still be
    /// changed before a task is made from the run; `parameters`, `resumeFrom`, `backends` and
    /// `dataParallel` were resolved and are read from here as they are.
    public var configuration: UpdateConfiguration
    /// The scheduler's plan and opened backends; nil when the configuration gave the backends.
    public let schedule: MachineSchedule?
    /// Under mpirun: the device this rank was given and why (`RankDeviceChoice`); nil otherwise.
    public var rankDevice: RankDeviceChoice? = nil

    /// The checkpoint the run continues (`configuration.checkpoints.resumeFrom`); nil for a new run.
    public var resume: TrainingCheckpoint? { configuration.checkpoints.resumeFrom }
    /// One line each: devices left out, OpenCL missing, fallbacks taken while scheduling. Print
    /// them; nothing here did, and a task made from this run does not repeat them.
    public var warnings: [String] { schedule?.warnings ?? [] }

    /// Where the run trains: "cpu" (also a k-NN update, on the host), "opencl:<name>", "<prefix> (frozen prefix) + <tail> (trainable
    /// tail)", or "data parallel: <a> (n) + <b> (m)".
    public var description: String {
        if graph == nil { return "cpu" }  // a k-NN's samples are appended on the host
        if let schedule { return schedule.description }
        if let dp = configuration.placement.dataParallel, !dp.replicas.isEmpty {
            let shares = dp.shares ?? dp.replicas.map { _ in 1 }
            return "data parallel: " + zip(dp.replicas, shares).map { "\($0.name) (\(Int($1)))" }.joined(separator: " + ")
        }
        guard let (prefix, tail) = configuration.placement.backends else { return "reference" }
        return prefix === tail ? tail.name : "\(prefix.name) (frozen prefix) + \(tail.name) (trainable tail)"
    }

    /// What was resolved, for people: the parameters, the device, the resume point, then the
    /// scheduler's plan (its `text()`) or a line saying the configuration gave the backends.
    public var report: String {
        var s = "parameters: \(parameters)\n"
        s += "device: \(description)\n"
        if let resume { s += "resuming at \(resume.position.description) of \(resume.parameters.epochs) epochs\n" }
        for w in warnings { s += "warning: \(w)\n" }
        s += schedule.map { "\n" + $0.plan.text() } ?? "backends given by the configuration (not scheduled)\n"
        return s
    }

    /// Resolves a run of `model` with `configuration`:
    /// 1. the hyperparameters: `configuration.parameters` over the model's defaults
    ///    (`TrainingParameters(optimizer:hyperparameters:overrides:)`), or over the checkpoint's when
    ///    `resumeFrom` is set (`TrainingCheckpoint.resumedParameters`), each value checked once against
    ///    what the model allows, and the mini-batch size against what the network can hold;
    /// 2. where it runs: the configuration's `backends` or `dataParallel` when either is set (the
    ///    expert override, not scheduled); otherwise `place` (`Scheduler.place`, as `plan` shows it)
    ///    within `computeUnits`, `deviceOption`/`preferredDevice` and `dataParallelMode` for one rank's
    ///    share of the mini-batch (the whole of it without `distributed`; as `plan` places it) (`environment`
    ///    supplies `UPDRAFT_DEVICE`, `UPDRAFT_DATA_PARALLEL` and the calibration cache), its backends
    ///    opened; a resumed run scheduled on as many replicas as its checkpoint's splits its
    ///    mini-batches by the checkpoint's shares.
    ///
    /// Whether the checkpoint belongs to the model and the training data is checked when training
    /// starts, where the data is at hand.
    /// - Throws: for a model without an optimizer, a hyperparameter the model does not allow (named,
    ///   with its allowed values), a mini-batch the network cannot hold, or a device pin that names no device.
    public static func resolve(model: CoreMLModel, configuration: UpdateConfiguration,
                               environment: [String: String] = ProcessInfo.processInfo.environment) throws -> ResolvedRun {
        try resolve(model: model, network: model, configuration: configuration, environment: environment)
    }

    /// As `resolve(model:configuration:environment:)`, training `network`: the model itself, or the
    /// network a model of another kind trains (a pipeline's networks joined).
    static func resolve(model: CoreMLModel, network: CoreMLModel, configuration: UpdateConfiguration,
                        environment: [String: String]) throws -> ResolvedRun {
        let graph = try NetworkGraph(model: network)
        guard let modelOptimizer = graph.updateParameters?.optimizer?.kind else {
            throw UpdraftError(.invalidModel, "the model has no optimizer in its update parameters",
                               hint: "set an SGD or Adam optimizer (coremltools: set_sgd_optimizer / set_adam_optimizer)")
        }
        let optimizer = configuration.optimizer ?? modelOptimizer
        let overrides = configuration.parameters
        let parameters = try configuration.checkpoints.resumeFrom?.resumedParameters(overrides: overrides, hyperparameters: graph.hyperparameters)
            ?? TrainingParameters(optimizer: optimizer, hyperparameters: graph.hyperparameters, overrides: overrides)
        var config = configuration
        // A training job makes as many passes as it has epochs; under mpirun each rank takes its share.
        config.placement.job = configuration.placement.job.map {
            Scheduler.Job(examples: $0.examples / max(1, configuration.distributed?.size ?? 1), passes: parameters.epochs)
        }
        var schedule: MachineSchedule?
        let (placement, rankDevice) = try place(
            graph: graph, batchSize: parameters.miniBatchSize,
            batchSizeSource: overrides[.miniBatchSize] == nil ? "the model's default miniBatchSize" : "miniBatchSize",
            placing: RunPlan.perRankBatch(parameters.miniBatchSize, ranks: configuration.distributed?.size ?? 1),
            configuration: &config, environment: environment)
        if let placement {
            let backends = try Scheduler.backends(for: placement.plan)
            let chosen = MachineSchedule(plan: placement.plan, backends: backends, warnings: placement.warnings + backends.warnings)
            config.placement.backends = (chosen.backends.prefix, chosen.backends.tail)
            if chosen.backends.isDataParallel {
                let replicas = chosen.backends.replicas
                let resumed = config.checkpoints.resumeFrom?.dataParallelShares.flatMap { $0.count == replicas.count ? $0 : nil }
                config.placement.dataParallel = DataParallelism(replicas: replicas, shares: resumed ?? chosen.backends.shares)
            }
            schedule = chosen
        }
        return ResolvedRun(model: model, graph: graph, parameters: parameters, configuration: config, schedule: schedule,
                           rankDevice: rankDevice)
    }
}

/// The settings that shape a run besides its hyperparameters, which a resumed run must keep as its
/// checkpoint had them (`TrainingCheckpoint` records them; a run that differs is refused).
public enum ResumedSetting: CaseIterable, Hashable, Sendable {
    /// `augmentation`: flips, crop and seed.
    case augmentation
    /// `shortLastBatch`.
    case shortLastBatch
    /// `frozenActivationsHalfPrecision`.
    case frozenActivationsHalfPrecision
    /// `checkpointEvery` and `checkpointEveryMiniBatches` (not checked: a resumed run may change them).
    case checkpointSchedule
}

extension UpdateConfiguration {
    /// Continues `checkpoint`'s run: sets `resumeFrom`, and takes from the checkpoint every setting
    /// that shapes the run except those in `own`, which stay as this configuration has them (and
    /// are refused when training starts if they differ from the checkpoint's, the schedule aside).
    /// `UpdateTask(resumingFrom:)` keeps its own checkpoint schedule when it sets one; `updraft
    /// train --resume` keeps the settings its command line gives.
    public mutating func resume(from checkpoint: TrainingCheckpoint, keeping own: Set<ResumedSetting> = []) {
        checkpoints.resumeFrom = checkpoint
        if !own.contains(.augmentation) { data.augmentation = checkpoint.augmentation }
        if !own.contains(.shortLastBatch) { data.shortLastBatch = checkpoint.shortLastBatch }
        if !own.contains(.frozenActivationsHalfPrecision) { frozenActivationsHalfPrecision = checkpoint.frozenActivationsHalfPrecision }
        if !own.contains(.checkpointSchedule) {
            checkpoints.everyEpochs = checkpoint.checkpointEvery
            checkpoints.everyMiniBatches = checkpoint.checkpointEveryMiniBatches
        }
    }
}
