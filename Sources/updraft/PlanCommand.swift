import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft plan MODEL.mlmodel [--compute-units U] [--batch-size N] [--device NAME|INDEX] [--json]`:
/// where training would run each layer, with estimated times, transfers and the total per batch.
let planCommand = CLICommand(
    CommandSpec(
        name: "plan",
        summary: "Show where each layer of a model would train (device, estimated forward and backward times, transfers)",
        positionals: "MODEL.mlmodel", minPositionals: 1, maxPositionals: 1,
        options: OptionSpec.table("""
            --compute-units U     devices the plan may use: cpuOnly, cpuAndGPU or all (default all, as in Core ML)
            --batch-size N        examples per batch (default: the model's miniBatchSize)
            --examples N          plan the whole job: N examples a pass, set-up (contexts, program builds) included
            --epochs N            with --examples: passes over them (default: the model's epochs, else 1)
            --device NAME|INDEX   run everything on one device: cpu, or an index or part of a name from `updraft devices`
            --json                print the plan as JSON
            --frozen-fp16         show what `train --frozen-fp16` would save: the frozen layers' activations as halves
            --feature-cache-fp16  show what `train --feature-cache-fp16` would save: cached features as halves
            """) + [dataParallelOption] + OptionSpec.table("""
            --ranks N      without mpirun: project N ranks (each planning its share of the batch)
            --link-gbps G  with --ranks: the link speed in Gb/s to estimate the gradient exchange with
            """),
        discussion: """
        Devices are calibrated once (a short measurement) and cached in $\(CalibrationCache.directoryVariable), \
        $XDG_CACHE_HOME/updraft or ~/.cache/updraft. Times are estimates from each layer's FLOPs and bytes and \
        each device's measured speed. The model stays on one device unless running the frozen prefix (layers that \
        depend on no updatable layer, forward only) on another device than the trainable tail is clearly faster, or \
        splitting every batch across OpenCL devices (data parallelism) is. \(DevicePin.environmentVariable) pins \
        a device like --device (the option wins). Under mpirun, every rank plans its share of the batch, the \
        gradient exchange is measured over the job's links with the model's gradient bytes, and rank 0 prints \
        each rank's plan and the estimated step. Half precision is never chosen by the plan: --frozen-fp16 and \
        --feature-cache-fp16 show what those train options would save (bytes fp32 against fp16, the layers that \
        store halves).
        """),
    run: { args in
        let path = args.positionals[0]
        // The same configuration `train` resolves; `ResolvedRun.plan` places it as `resolve` does, opening nothing.
        var config = UpdateConfiguration()
        try computeConfiguration(args, dataParallel: true, into: &config)
        let file = try CoreMLModel(contentsOf: URL(fileURLWithPath: path))
        // What runs on a device is the model kind's to say (a pipeline's joined networks; a k-NN: nothing).
        let (planned, note) = try ModelKinds.plannedNetwork(file)
        guard let model = planned else {
            if args.flag("json") {
                let object: [String: Any] = ["model": path, "note": note ?? "", "layers": [Any]()]
                print(String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys]), as: UTF8.self))
            } else {
                print("Model: \(path)")
                if let note { print(note) }
            }
            return 0
        }
        let batchOption = try args.int("batch-size")
        if let examples = try args.int("examples") {
            guard examples >= 1 else { throw UsageError("--examples must be at least 1, got \(examples)") }
            let modelEpochs = (try? NetworkGraph(model: model))?.updateParameters?.epochs.map { Int(clamping: $0.defaultValue) }
            let epochs = try args.int("epochs") ?? modelEpochs ?? 1
            guard epochs >= 1 else { throw UsageError("--epochs must be at least 1, got \(epochs)") }
            config.placement.job = Scheduler.Job(examples: examples, passes: epochs)
        } else if try args.int("epochs") != nil {
            throw UsageError("--epochs goes with --examples (the job it plans)")
        }
        let ranks = try joinRanksIfLaunched()   // nil unless launched by mpirun
        let projected = try args.int("ranks")
        let linkGbps = try args.double("link-gbps")
        if let projected, projected < 1 { throw UsageError("--ranks must be at least 1, got \(projected)") }
        if let linkGbps, !(linkGbps > 0) { throw UsageError("--link-gbps must be above 0, got \(linkGbps)") }
        if projected != nil && ranks != nil { throw UsageError("--ranks is for a projection without mpirun; under mpirun the job's ranks are planned") }
        if (projected != nil) != (linkGbps != nil) { throw UsageError("--ranks and --link-gbps go together") }
        let rankCount = ranks?.size ?? projected ?? 1

        // Under mpirun each rank plans its share on the device `train` would give it (by its rank on its host).
        config.distributed = ranks
        let resolved = try ResolvedRun.plan(network: model, batchSize: batchOption, batchSizeSource: "--batch-size",
                                            ranks: rankCount, configuration: config)
        let (graph, plan, batchSize, perRank) = (resolved.graph, resolved.plan, resolved.batchSize, resolved.perRankBatchSize)
        let warnings = resolved.warnings
        for w in warnings { printError("warning: \(w)") }
        // Several ranks: every rank's plan, and the gradient exchange (measured under mpirun).
        var rankLines: [String] = []
        var rankObject: [String: Any]? = nil
        if rankCount > 1 {
            let bytes = try RankPlanning.gradientBytes(model: model, graph: graph)
            var plans: [(rank: Int, summary: String, ms: Double)]
            let seconds: Double, bandwidth: String
            if let ranks {
                let summaries = try ranks.gather(plan.summary), totals = try ranks.gather([plan.totalMs])
                plans = summaries.indices.map { ($0, summaries[$0], totals[$0][0]) }
                let measured = try ranks.measureExchange(bytes: bytes)
                seconds = measured.seconds
                bandwidth = String(format: "measured %.2f GB/s bus bandwidth over %d ranks", measured.busBytesPerSecond / 1e9, ranks.size)
            } else {
                plans = (0..<rankCount).map { ($0, plan.summary + " (as this host)", plan.totalMs) }
                seconds = DistributedTraining.exchangeSeconds(bytes: bytes, ranks: rankCount, busBytesPerSecond: linkGbps! * 1e9 / 8)
                bandwidth = String(format: "projected over %.0f Gb/s links (not measured)", linkGbps!)
            }
            rankLines = RankPlanning.lines(ranks: rankCount, batch: batchSize, perRank: perRank, plans: plans,
                                           gradientBytes: bytes, exchangeSeconds: seconds, bandwidth: bandwidth)
            if let ranks, let rankDevice = resolved.rankDevice {
                rankLines += [""] + (try ranks.deviceMap(device: plan.summary, choice: rankDevice))
            }
            rankObject = ["count": rankCount, "globalBatch": batchSize, "perRankBatch": perRank, "gradientBytes": bytes,
                          "exchangeMs": seconds * 1000, "bandwidth": bandwidth,
                          "plans": plans.map { ["rank": $0.rank, "summary": $0.summary, "totalMs": $0.ms] as [String: Any] }]
        }
        defer { leaveRanks(ranks) }
        let (frozenHalf, cacheHalf) = (args.flag("frozen-fp16"), args.flag("feature-cache-fp16"))
        let half = frozenHalf || cacheHalf
            ? try HalfPrecisionEffect(graph: graph, batchSize: perRank, frozenActivations: frozenHalf, featureCache: cacheHalf) : nil
        if args.flag("json") {
            var object = try plan.jsonObject()
            object["model"] = path
            object["warnings"] = warnings
            if let note { object["note"] = note }
            if let rankObject { object["ranks"] = rankObject }
            if let half { object["halfPrecision"] = try JSONSerialization.jsonObject(with: JSONEncoder().encode(half)) }
            let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        } else {
            print("Model: \(path)")
            if let note { print(note) }
            print(plan.text(), terminator: "")
            for line in rankLines { print(line) }
            if let half { print(half.text(), terminator: "") }
        }
        return 0
    })
