import Foundation
import UpdraftCore
import UpdraftModel
import UpdraftPlacement
import UpdraftData

/// Where a run would train, placed as `ResolvedRun.resolve` places it (`ResolvedRun.place`), with
/// nothing opened and no hyperparameter checked: what `updraft plan` prints.
public struct RunPlan {
    /// The network placed.
    public let graph: NetworkGraph
    /// The mini-batch the plan is for, all ranks together.
    public let batchSize: Int
    /// The most examples of it one rank takes (`batchSize` without ranks); the size placed.
    public let perRankBatchSize: Int
    /// The scheduler's plan for one rank's share (print it with `text()` or `jsonObject()`).
    public let plan: ExecutionPlan
    /// One line each: devices left out, OpenCL missing, fallbacks taken. Print them; nothing here did.
    public let warnings: [String]
    /// Under mpirun: the device this rank was given and why; nil otherwise.
    public let rankDevice: RankDeviceChoice?

    /// Examples per rank of a global batch (the most any rank gets when examples split evenly).
    public static func perRankBatch(_ batch: Int, ranks: Int) -> Int {
        let r = max(1, ranks)  // rounded up without batch + ranks - 1, which overflows for ranks near Int.max
        return max(1, batch / r + (batch % r == 0 ? 0 : 1))
    }
}

extension ResolvedRun {
    /// Where a run of `network` with `configuration` would train, without checking its
    /// hyperparameters or opening a backend: `place`, as `resolve` calls it, for `batchSize` (the
    /// model's default miniBatchSize when nil, else 8) split across `ranks` (default: the
    /// configuration's `distributed` ranks, else 1), each rank placing its share.
    /// `batchSizeSource` names a given `batchSize` in errors (`updraft plan`: "--batch-size").
    /// - Throws: as `place`, and when the configuration gives the backends (nothing is placed).
    public static func plan(network: CoreMLModel, batchSize: Int? = nil, batchSizeSource: String = "batchSize",
                            ranks: Int? = nil, configuration: UpdateConfiguration,
                            environment: [String: String] = ProcessInfo.processInfo.environment) throws -> RunPlan {
        let graph = try NetworkGraph(model: network)
        let modelDefault = graph.updateParameters?.optimizer?.miniBatchSize.map { Int(clamping: $0.defaultValue) }
        let batch = batchSize ?? modelDefault ?? 8
        let source = batchSize != nil ? batchSizeSource
            : modelDefault != nil ? "the model's default miniBatchSize" : "the default mini-batch size"
        let perRank = RunPlan.perRankBatch(batch, ranks: ranks ?? configuration.distributed?.size ?? 1)
        var config = configuration
        let (placement, rankDevice) = try place(graph: graph, batchSize: batch, batchSizeSource: source, placing: perRank,
                                                configuration: &config, environment: environment)
        guard let placement else {
            throw UpdraftError(.invalidArgument, "the configuration gives the backends, so there is no placement to plan",
                               hint: "leave backends and dataParallel unset to plan within computeUnits and the device options")
        }
        return RunPlan(graph: graph, batchSize: batch, perRankBatchSize: perRank, plan: placement.plan,
                       warnings: placement.warnings, rankDevice: rankDevice)
    }

    /// The placement step of `resolve` and `plan`: `batchSize` checked against what the network can
    /// hold (`batchSizeSource` names it in the error); under mpirun, this rank's device
    /// (`UpdateConfiguration.chooseRankDevice`, into `configuration.placement.deviceOption`); then, unless
    /// `configuration` gives the backends or data parallelism (the expert override: nil placement),
    /// `Scheduler.place` of `placed` examples within its compute units, device and data-parallel mode.
    static func place(graph: NetworkGraph, batchSize: Int, batchSizeSource: String, placing placed: Int,
                      configuration: inout UpdateConfiguration, environment: [String: String])
        throws -> (placement: (plan: ExecutionPlan, warnings: [String])?, rankDevice: RankDeviceChoice?) {
        try SizeLimits.checkBatchSize(batchSize, graph: graph, source: batchSizeSource)
        // Under mpirun, each rank on a host takes its own device (by local rank) unless one is named.
        let rankDevice = try configuration.chooseRankDevice(environment: environment)
        guard configuration.placement.backends == nil && configuration.placement.dataParallel == nil else { return (nil, rankDevice) }
        let placement = try Scheduler.place(graph: graph, batchSize: placed, configuration: configuration, environment: environment)
        return (placement, rankDevice)
    }
}
