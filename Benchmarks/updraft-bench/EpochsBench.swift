import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft-bench epochs`: fine-tuning throughput of SqueezeNet 1.1 (conv10 + fullyconnected0), or of
/// any updatable model (`--model`), on every compute target, with and without the feature cache,
/// optionally next to PyTorch.
let epochsCommand = CLICommand(CommandSpec(
    name: "epochs",
    summary: "time training epochs of the SqueezeNet 1.1 fine-tuning workload (or of any updatable model) on each device",
    options: OptionSpec.table("""
        --model M.mlmodel            time this updatable model instead (its updatable layers, optimizer and loss; synthetic data shaped for its input)
        --batch-size N               with --model: the mini-batch size (default: the model's)
        --pytorch-model ARCH         with --model --compare-pytorch: the torchvision architecture to run (mobilenet_v2 or resnet18; default: the one make_bench_models.py recorded in the model)
        --images N                   synthetic training images per epoch (default 128)
        --data DIR                   train from image files instead (class folders 0...9, e.g. from `updraft-bench data --generate-only`)
        --epochs E                   epochs per run: the first, then the steady state (default 2)
        --compute-units U            only cpuOnly (CPU backend), cpuAndGPU (OpenCL GPUs) or all (every OpenCL device)
        --device INDEX               only this OpenCL device index (see `updraft devices`), or cpu
        --no-feature-cache           only runs without the feature cache (default: with and without)
        --feature-cache on|off|both  which runs to make (default both)
        --frozen-fp16                train with the frozen layers' activations in half precision (train --frozen-fp16)
        --json                       print JSON: {"runs": [one object per run], "work", "pytorch", "ratios", "notes"}
        --compare-pytorch            also run Benchmarks/pytorch_baseline.py and print Updraft/PyTorch throughput ratios
        --pytorch-script PATH        the PyTorch baseline script (default: found from the working directory or the executable)
        --op-times                   time every backend op (waiting for each) and print where each epoch's time goes
        --profile                    profile the steady epochs per layer and pass (waiting for each): time, GFLOP/s, % of SGEMM, engine
        --in-process                 run every configuration in this process (peak host memory is then the process's peak so far)
        --mpi                        under mpirun -np N: the first target on rank 0 alone, then on all N ranks; prints the scaling
        """),
    discussion: """
    The default workload: SqueezeNet 1.1 built in memory (227x227 RGB, 10 classes), conv10 and fullyconnected0
    trained with SGD (learning rate 0.001, momentum 0.9), mini-batch 64, categorical cross-entropy, on
    N seeded random images (or, with --data, the image files of DIR, decoded and stretched to 227x227 as
    `updraft train` does, against a PyTorch DataLoader with as many workers as cores); everything
    before conv10 is frozen. With --model M.mlmodel: that model's updatable layers with its own
    optimizer and loss, on seeded random images of its input size (pixel values 0...255 before the
    model's image scaler); --compare-pytorch then runs the same torchvision model in PyTorch with only
    its last layer trained, at the same batch size, input size and thread count (models from
    Benchmarks/make_bench_models.py record their architecture). Each configuration (compute units,
    device, feature cache on/off) runs in a child process so that its peak host memory is its own.
    The steady state is the best epoch after the first. GFLOP/s counts the work the executor does
    (frozen forward, tail forward, weight gradients, needed input gradients), from the op descriptions.
    """
)) { args in
    let bench = try EpochsBench(args)
    return args.flag("mpi") ? try EpochsMPIBench(bench).run() : try bench.run()
}

struct EpochsBench {
    let workload: EpochsWorkload
    let pytorchArch: String?
    let images: Int
    let epochs: Int
    let units: String?
    let device: String?
    let cacheSettings: [Bool]
    let json: Bool
    let comparePyTorch: Bool
    let pytorchScript: String?
    let inProcess: Bool
    let opTimes: Bool
    let profile: Bool
    let data: String?

    init(_ args: ParsedArguments) throws {
        data = args.value("data")
        if let data {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: data, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw UsageError("--data \(data) is not a folder of class folders")
            }
        }
        let batch = try args.int("batch-size")
        var w: EpochsWorkload
        if let path = args.value("model") {
            w = try EpochsWorkload.load(path: path, batch: batch)
        } else {
            if batch != nil { throw UsageError("--batch-size goes with --model (the SqueezeNet workload uses 64)") }
            w = try EpochsWorkload.squeezeNet()
        }
        w.frozenHalf = args.flag("frozen-fp16")
        workload = w
        pytorchArch = args.value("pytorch-model") ?? w.torchvisionArch
        if let arch = pytorchArch, !PyTorchComparison.architectures.contains(arch) {
            throw UsageError("--pytorch-model \(arch) is not one the baseline script runs: "
                             + PyTorchComparison.architectures.joined(separator: ", "))
        }
        images = try data.map { try w.fileDataset(dir: $0).count } ?? args.int("images") ?? 128
        epochs = try args.int("epochs") ?? 2
        guard images >= 1 else { throw UsageError("--images must be at least 1, got \(images)") }
        guard epochs >= 1 else { throw UsageError("--epochs must be at least 1, got \(epochs)") }
        let bytes = UInt64(images) * UInt64(workload.itemShape.count * 4)
        guard bytes < HostInfo.current.memoryBytes / 2 else {
            throw UsageError("--images \(images) needs \(formatBytes(bytes)) of synthetic images, more than half of this machine's memory")
        }
        units = try args.choice("compute-units", ["cpuOnly", "cpuAndGPU", "all"])
        device = args.value("device")
        if let d = device, d.lowercased() != "cpu", Int(d) == nil {
            throw UsageError("--device takes an OpenCL device index or cpu, got '\(d)'")
        }
        let cacheChoice = try args.choice("feature-cache", ["on", "off", "both"])
        if args.flag("no-feature-cache"), let c = cacheChoice, c != "off" {
            throw UsageError("--no-feature-cache contradicts --feature-cache \(c)")
        }
        switch args.flag("no-feature-cache") ? "off" : (cacheChoice ?? "both") {
        case "on": cacheSettings = [true]
        case "off": cacheSettings = [false]
        default: cacheSettings = [false, true]
        }
        json = args.flag("json")
        comparePyTorch = args.flag("compare-pytorch")
        pytorchScript = args.value("pytorch-script")
        inProcess = args.flag("in-process")
        opTimes = args.flag("op-times")
        profile = args.flag("profile")
    }

    /// The targets the options select, and notes on what is missing.
    func targets() throws -> (targets: [EpochsTarget], notes: [String]) {
        var notes: [String] = []
        let cpuName = HostInfo.current.cpuName
        let cpu = EpochsTarget(computeUnits: "cpuOnly", openCLIndex: nil, deviceName: cpuName, deviceKind: "cpu")
        let wantsCPU = device.map { $0.lowercased() == "cpu" } ?? true
        let wantsIndex = device.flatMap { Int($0) }
        if units == "cpuOnly", let i = wantsIndex {
            throw UsageError("--device \(i) is an OpenCL device, but --compute-units cpuOnly selects the CPU backend")
        }
        if let u = units, u != "cpuOnly", device != nil, wantsIndex == nil {
            throw UsageError("--device cpu selects the CPU backend, but --compute-units \(u) selects OpenCL devices")
        }
        var list: [EpochsTarget] = []
        if wantsCPU, units == nil || units == "cpuOnly" { list.append(cpu) }
        if units != "cpuOnly", device == nil || wantsIndex != nil {
            var devices: [OpenCLDevice] = []
            do { devices = try OpenCLRuntime.devices() } catch {
                notes.append("no OpenCL runs: \(error)")
            }
            for d in devices {
                if let i = wantsIndex, d.info.index != i { continue }
                let isGPU = d.info.type == .gpu
                let label: String
                switch units {
                case "cpuAndGPU": guard isGPU else { continue }; label = "cpuAndGPU"
                case "all": label = "all"
                default: label = isGPU ? "cpuAndGPU" : "all"
                }
                list.append(EpochsTarget(computeUnits: label, openCLIndex: d.info.index, deviceName: d.info.name,
                                         deviceKind: d.info.type.rawValue))
            }
            if let i = wantsIndex, !devices.contains(where: { $0.info.index == i }) {
                throw UpdraftError(.invalidArgument, "no OpenCL device with index \(i)",
                                   hint: "devices: " + (devices.isEmpty ? "none" : devices.map { "\($0.info.index) (\($0.info.name))" }.joined(separator: ", ")))
            }
            if units == "cpuAndGPU", !devices.isEmpty, !list.contains(where: { $0.openCLIndex != nil }) {
                notes.append("no OpenCL GPU here: cpuAndGPU has nothing to run (try --compute-units all)")
            }
        }
        return (list, notes)
    }

    func run() throws -> Int32 {
        let (targets, targetNotes) = try targets()
        var notes = targetNotes
        var results: [EpochsRunResult] = []
        var attemptsHere = 0
        for target in targets {
            for cache in cacheSettings {
                if !json || !inProcess {
                    printError("running \(target.computeUnits) on \(target.label) (\(target.deviceName)), feature cache \(cache ? "on" : "off")")
                }
                let outcome = inProcess ? runHere(target, cache: cache, firstInProcess: attemptsHere == 0)
                                        : runInChild(target, cache: cache)
                if inProcess { attemptsHere += 1 }
                results += outcome.runs
                notes += outcome.notes
                // A device whose ops fail fails the same way with the cache: one note, then the next device.
                if outcome.runs.isEmpty, target.openCLIndex != nil { break }
            }
        }

        let work = try StepWork(training: TrainingGraph(graph: NetworkGraph(model: workload.model(epochs: epochs))),
                                batch: workload.batch)
        var pytorch: PyTorchComparison.Outcome?
        var ratios: [PyTorchComparison.Ratio] = []
        if comparePyTorch {
            var devices: [String] = []
            if targets.contains(where: { $0.openCLIndex == nil }) { devices.append("cpu") }
            if targets.contains(where: { $0.deviceKind == "gpu" }) { devices.append("cuda") }
            if devices.isEmpty {
                notes.append("PyTorch comparison skipped: no CPU or GPU run to compare with")
            } else if workload.path != nil, pytorchArch == nil {
                notes.append("PyTorch comparison skipped: \(workload.modelName) records no torchvision architecture (give --pytorch-model ARCH)")
            } else if let script = PyTorchComparison.locateScript(explicit: pytorchScript) {
                let threads = results.compactMap(\.threads).first ?? CPUBackend().threadCount
                let model = PyTorchComparison.Model(arch: workload.path == nil ? nil : pytorchArch, size: workload.itemShape[1],
                                                    batch: workload.batch, classes: workload.classes,
                                                    relu6AsReLU: workload.relu6AsReLU)
                let outcome = PyTorchComparison.run(script: script, images: images, epochs: epochs, threads: threads, devices: devices,
                                                    data: data, model: model)
                printError("ran PyTorch: " + outcome.command.joined(separator: " "))
                notes += outcome.notes
                ratios = workload.path == nil ? PyTorchComparison.ratios(updraft: results, pytorch: outcome.runs)
                    : PyTorchComparison.ratios(updraft: results, pytorch: outcome.runs, cpuTarget: { $0 ? nil : 2 })
                pytorch = outcome
            } else {
                notes.append("PyTorch comparison skipped: Benchmarks/pytorch_baseline.py not found from here (give --pytorch-script PATH)")
            }
        }
        notes += lossConsistencyNotes(results)
        let halfNote = "--frozen-fp16: every run stored the frozen layers' activations as halves (fp32 arithmetic)"
        if workload.frozenHalf && !notes.contains(halfNote) { notes.append(halfNote) }  // a child's report may carry it

        if json {
            print(try jsonReport(results: results, work: work, pytorch: pytorch, ratios: ratios, notes: notes))
        } else {
            print(textReport(results: results, work: work, pytorch: pytorch, ratios: ratios, notes: notes), terminator: "")
        }
        return results.isEmpty ? 1 : 0
    }

    // MARK: Running one configuration

    struct Outcome { var runs: [EpochsRunResult] = []; var notes: [String] = [] }

    /// - Parameter firstInProcess: nothing ran in this process before, so its peak is this run's own.
    private func runHere(_ target: EpochsTarget, cache: Bool, firstInProcess: Bool) -> Outcome {
        let scope = firstInProcess ? "a process that ran only this configuration"
                                   : "the whole process so far (earlier runs included, --in-process)"
        do {
            let r = try runEpochs(workload: workload, target: target, featureCache: cache, images: images, epochs: epochs, peakScope: scope,
                                  opTimes: opTimes, profile: profile, dataDir: data, progress: { printError($0) })
            return Outcome(runs: [r])
        } catch {
            return Outcome(notes: [skipNote(target, cache: cache, error: "\(error)")])
        }
    }

    private func skipNote(_ target: EpochsTarget, cache: Bool, error: String) -> String {
        let first = error.split(separator: "\n").first.map(String.init) ?? error
        return "skipped \(target.computeUnits) on \(target.label) (\(target.deviceName)), feature cache \(cache ? "on" : "off"): \(first)"
    }

    /// Runs the configuration in a fresh copy of this executable (`--in-process --json`), so that its
    /// peak memory is its own and a driver crash takes down only that run.
    private func runInChild(_ target: EpochsTarget, cache: Bool) -> Outcome {
        guard let exe = executablePath() else {
            var o = runHere(target, cache: cache, firstInProcess: false)
            o.notes.append("cannot find this executable to run a child process: peak host memory is the whole process's")
            return o
        }
        var args: [String] = ["epochs", "--in-process", "--json", "--images", String(images), "--epochs", String(epochs),
                              "--compute-units", target.computeUnits, "--device", target.openCLIndex.map(String.init) ?? "cpu",
                              "--feature-cache", cache ? "on" : "off"]
        if let path = workload.path { args += ["--model", path, "--batch-size", String(workload.batch)] }
        if opTimes { args.append("--op-times") }
        if profile { args.append("--profile") }
        if workload.frozenHalf { args.append("--frozen-fp16") }
        if let data { args += ["--data", data] }
        let result: ChildResult
        do {
            result = try runChild(executable: exe, arguments: args, captureStandardError: false)
        } catch {
            return Outcome(notes: [skipNote(target, cache: cache, error: "cannot start a child process: \(error)")])
        }
        guard !result.signalled else {
            return Outcome(notes: [skipNote(target, cache: cache, error: "the run crashed (signal \(result.status))")])
        }
        // The report is the last thing printed; skip anything a driver may have written before it.
        let text = result.standardOutput
        let start = text.hasPrefix("{") ? text.startIndex : (text.range(of: "\n{")?.upperBound).map { text.index(before: $0) }
        guard let start, let object = try? JSONSerialization.jsonObject(with: Data(text[start...].utf8)) as? [String: Any] else {
            return Outcome(notes: [skipNote(target, cache: cache, error: "the run exited with status \(result.status) and no report")])
        }
        var outcome = Outcome()
        outcome.notes = object["notes"] as? [String] ?? []
        if let runs = object["runs"] as? [Any],
           let decoded = try? JSONDecoder().decode([EpochsRunResult].self, from: JSONSerialization.data(withJSONObject: runs)) {
            outcome.runs = decoded
        }
        return outcome
    }

    /// The feature cache must not change what is learned: the first epoch's mean loss agrees with and
    /// without it (to float rounding: the prefix may run in differently sized batches).
    private func lossConsistencyNotes(_ results: [EpochsRunResult]) -> [String] {
        var notes: [String] = []
        for on in results where on.featureCache {
            guard let off = results.first(where: { !$0.featureCache && $0.device == on.device && $0.computeUnits == on.computeUnits }),
                  let a = on.meanLoss.first, let b = off.meanLoss.first else { continue }
            if abs(a - b) > 1e-3 * max(1, abs(b)) {
                notes.append("warning: on \(on.device) the first epoch's mean loss is \(a) with the feature cache and \(b) without: they should agree")
            }
        }
        return notes
    }
}
