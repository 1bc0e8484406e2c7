import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft-bench epochs --mpi` under `mpirun -np N`: the epochs workload on one target, first on
/// rank 0 alone (one process, no MPI in the step), then on all N ranks (each training its examples of
/// every global batch of 64); rank 0 prints steady epoch times, the speedup, the step time split
/// into compute and measured gradient exchange, and checks that the losses agree.
struct EpochsMPIBench {
    let bench: EpochsBench

    init(_ bench: EpochsBench) { self.bench = bench }

    func run() throws -> Int32 {
        guard let ranks = try DistributedTraining.launched() else {
            throw UsageError("--mpi runs under mpirun: mpirun -np 2 updraft-bench epochs --mpi [--device cpu|INDEX]")
        }
        if !ranks.isPrimary { StandardOutput.silence() }
        let (targets, notes) = try bench.targets()
        guard let target = targets.first else {
            throw UpdraftError(.device, "no target to run on: \(notes.joined(separator: "; "))")
        }
        let say: (String) -> Void = { if ranks.isPrimary { printError($0) } }
        var rows: [[String: Any]] = []
        var lines: [String] = []
        let model = try bench.workload.model(epochs: bench.epochs)
        let graph = try NetworkGraph(model: model)
        let gradientBytes = try graph.updatableLayers.reduce(0) { sum, layer in
            sum + 4 * (try model.weights(ofLayer: layer.name).count + (try model.bias(ofLayer: layer.name)?.count ?? 0))
        }
        let exchange = try ranks.measureExchange(bytes: gradientBytes, rounds: 10)
        let steps = (bench.images + bench.workload.batch - 1) / bench.workload.batch
        // Ranks on one host share its cores: the CPU backend of each gets its part of them, so that one
        // process and the ranks use the same hardware (on separate hosts each rank has all of its own).
        let localRanks = ProcessInfo.processInfo.environment["OMPI_COMM_WORLD_LOCAL_SIZE"].flatMap(Int.init) ?? 1
        let cores = HostInfo.usableCores
        let rankThreads = target.openCLIndex == nil && localRanks > 1 ? max(1, cores / localRanks) : nil
        if let rankThreads { say("\(localRanks) ranks on this host: \(rankThreads) CPU thread(s) each, one process \(cores)") }
        for cache in bench.cacheSettings {
            say("one process: \(target.computeUnits) on \(target.label), feature cache \(cache ? "on" : "off")")
            var single: EpochsRunResult? = nil
            if ranks.isPrimary {
                single = try runEpochs(workload: bench.workload, target: target, featureCache: cache, images: bench.images, epochs: bench.epochs,
                                       peakScope: "rank 0", opTimes: false, progress: say)
            }
            // The other ranks wait for rank 0's single-process run (as long as it takes).
            try ranks.world.barrier("rank 0's single-process run", timeout: .infinity)
            say("\(ranks.size) ranks: \(target.computeUnits) on \(target.label), feature cache \(cache ? "on" : "off")")
            let multi = try runEpochs(workload: bench.workload, target: target, featureCache: cache, images: bench.images, epochs: bench.epochs,
                                      peakScope: "rank 0", opTimes: false, distributed: ranks, cpuThreads: rankThreads,
                                      progress: say)
            guard let single else { continue }
            let oneMs = single.steadyEpochMilliseconds, manyMs = multi.steadyEpochMilliseconds
            let speedup = oneMs / max(manyMs, 1e-9)
            let lossGap = zip(single.meanLoss, multi.meanLoss).map { abs($0 - $1) / max(1e-9, abs($0)) }.max() ?? 0
            lines.append(String(format: "feature cache %@: 1 process %.0f ms per epoch (%.1f images/s), %d ranks %.0f ms (%.1f images/s): "
                                + "speedup %.2f, efficiency %.0f%%; step %.1f ms -> %.1f ms; largest relative gap in epoch mean loss %.1e",
                                cache ? "on" : "off", oneMs, single.imagesPerSecond, ranks.size, manyMs, multi.imagesPerSecond,
                                speedup, 100 * speedup / Double(ranks.size), oneMs / Double(steps), manyMs / Double(steps), lossGap))
            rows.append(["featureCache": cache, "rankThreads": multi.threads as Any, "singleThreads": single.threads as Any, "ranks": ranks.size, "singleEpochMs": oneMs, "ranksEpochMs": manyMs,
                         "singleImagesPerSecond": single.imagesPerSecond, "ranksImagesPerSecond": multi.imagesPerSecond,
                         "speedup": speedup, "stepsPerEpoch": steps, "singleStepMs": oneMs / Double(steps),
                         "ranksStepMs": manyMs / Double(steps), "meanLossRelativeGap": lossGap,
                         "singleMeanLoss": single.meanLoss, "ranksMeanLoss": multi.meanLoss])
        }
        let exchangeLine = String(format: "gradient exchange (deterministic sum over %d ranks): %.2f MB per step, measured %.2f ms "
                                  + "(%.2f GB/s bus bandwidth)", ranks.size, Double(gradientBytes) / 1e6, exchange.seconds * 1e3,
                                  exchange.busBytesPerSecond / 1e9)
        if ranks.isPrimary {
            if bench.json {
                let object: [String: Any] = ["target": target.label, "device": target.deviceName, "images": bench.images,
                                             "epochs": bench.epochs, "batch": bench.workload.batch, "gradientBytes": gradientBytes,
                                             "exchangeMs": exchange.seconds * 1e3, "busBytesPerSecond": exchange.busBytesPerSecond,
                                             "runs": rows, "notes": notes]
                let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
                print(String(decoding: data, as: UTF8.self))
            } else {
                print("epochs --mpi: \(target.computeUnits) on \(target.label) (\(target.deviceName)), \(bench.images) images, "
                      + "batch \(bench.workload.batch), \(bench.epochs) epochs (steady = best after the first)")
                for line in lines + [exchangeLine] + notes { print("  " + line) }
            }
        }
        ranks.world.finalize()
        return 0
    }
}
