import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft tune [--device N] [--quick] [--model M.mlmodel --batch-size B]`: searches the GEMM and
/// convolution kernels' parameters (and CLBlast) on one OpenCL device for the shapes a model trains
/// with, and stores the winners in the calibration cache, where every later run on that device,
/// driver and kernel source finds them.
let tuneCommand = CLICommand(
    CommandSpec(
        name: "tune",
        summary: "Tune the GEMM and convolution kernels (tilings, k unroll, local staging, split-K, CLBlast) for one OpenCL device",
        options: OptionSpec.table("""
            --device INDEX     OpenCL device index from `updraft devices` (default: the first GPU, else 0)
            --quick            the quick space (table tilings, common GPU shapes, k unroll, global reads, split-K 1/4/16, CLBlast), 90 s budget
            --space S          tiny, quick or full (default full: every well-formed tiling, 900 s budget)
            --budget SECONDS   stop after this long and keep the best so far (default: the space's)
            --model M.mlmodel  tune the shapes this model trains with (default: SqueezeNet 1.1, 10 classes)
            --batch-size B     the batch size to tune for (default: the model's miniBatchSize, else 64)
            --no-clblast       leave CLBlast out of the candidates
            --json             print what was measured as JSON
            --cpu              tune the CPU backend's convolutions, pooling and inner products instead: per shape and pass, Updraft's own algorithms against oneDNN
            --threads T        with --cpu: the CPU backend's threads to tune for (default: UPDRAFT_CPU_THREADS, else the cores this process may use)
            --repeats R        with --cpu: timed calls per algorithm and shape, the best kept (default 3)
            """),
        discussion: """
        Each candidate is built, checked against the Double reference on a small problem of the same kind, then \
        timed on the real shape (forward, input gradient, weight gradient); the fastest per shape class wins. \
        Results go to \(CalibrationCache.tuningFileName) in the calibration cache ($\(CalibrationCache.directoryVariable), \
        $XDG_CACHE_HOME/updraft or ~/.cache/updraft), keyed by device, driver version and kernel-source hash; \
        devices without a tuning use the built-in table. \(CalibrationCache.tuningVariable)=off ignores stored tunings.
        With --cpu, each CPU convolution algorithm that runs a shape (im2col + OpenBLAS, Winograd F(2x2) and F(4x4), \
        oneDNN when libdnnl.so.2 loads) is checked against im2col and timed; the fastest per shape and pass goes to \
        \(CPUConvolutionTuning.fileName), keyed by CPU model, oneDNN version and thread count (UPDRAFT_ONEDNN=off ignores it). \
        The pooling and inner-product passes are timed the same way, Updraft's own against oneDNN (checked against the \
        own result first); oneDNN is stored only where it is more than 3% faster.
        """),
    run: { args in
        let space: KernelTuningSpace
        if let s = try args.choice("space", KernelTuningSpace.allCases.map(\.rawValue)) {
            guard !args.flag("quick") || s == "quick" else { throw UsageError("--quick and --space \(s) disagree; give one") }
            space = KernelTuningSpace(rawValue: s)!
        } else {
            space = args.flag("quick") ? .quick : .full
        }
        let budget = try args.double("budget")
        if let budget, !(budget > 0) { throw UsageError("--budget must be a positive number of seconds, got \(budget)") }
        let graph: NetworkGraph
        let modelName: String
        if let path = args.value("model") {
            graph = try NetworkGraph(model: try CoreMLModel(contentsOf: URL(fileURLWithPath: path)))
            modelName = path
        } else {
            graph = try NetworkGraph(model: try SqueezeNet.build(.init(classes: 10)))
            modelName = "SqueezeNet 1.1 (10 classes)"
        }
        let batch = try args.int("batch-size")
            ?? graph.updateParameters?.optimizer?.miniBatchSize.map { Int(clamping: $0.defaultValue) } ?? 64
        guard batch >= 1 else { throw UsageError("--batch-size must be at least 1, got \(batch)") }

        if args.flag("cpu") {
            return try tuneCPU(graph: graph, modelName: modelName, batch: batch, threads: try args.int("threads"),
                               repeats: try args.int("repeats") ?? 3, json: args.flag("json"))
        }
        let device = try pickDevice(try args.int("device"))
        var tuner = KernelTuner(context: try OpenCLContext(device: device), space: space, budgetSeconds: budget)
        tuner.includeCLBlast = !args.flag("no-clblast")
        let json = args.flag("json")
        tuner.log = { line in printError("  " + line) }
        let problems = try KernelTuningProblem.forTraining(graph, batch: batch)
        guard !problems.isEmpty else {
            throw UpdraftError(.invalidArgument, "\(modelName) has no convolution or inner-product layer to tune",
                               hint: "tune with a model that has them, or leave out --model")
        }
        printError("tuning \(problems.count) shapes of \(modelName) at batch \(batch) on \(device.info.name) "
                   + "(\(space.rawValue) space, budget \(Int(tuner.budgetSeconds)) s)")
        let cache = CalibrationCache()
        let report = try tuner.tune(problems, cache: cache)
        if json {
            let data = try JSONSerialization.data(withJSONObject: reportJSON(report, device: device, model: modelName, batch: batch),
                                                  options: [.prettyPrinted, .sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        } else {
            print(String(format: "tuned %d shapes in %.1f s on %@; stored in %@", report.outcomes.count, report.seconds,
                         device.info.name, cache.tuningFileURL.path))
            let changed = report.entry.variants.count
            print("\(changed) shape classes run a tuned variant (\(report.entry.variants.values.filter { $0.engine == .clblast }.count) on CLBlast); the rest keep the table")
            if !report.skipped.isEmpty {
                print("budget ran out: \(report.skipped.count) shapes keep the table (\(report.skipped.map(\.name).joined(separator: ", ")))")
            }
        }
        return 0
    })

/// The OpenCL device `--device` names, else the first GPU, else the first device.
private func pickDevice(_ index: Int?) throws -> OpenCLDevice {
    let devices = try OpenCLRuntime.devices()
    guard !devices.isEmpty else {
        throw UpdraftError(.device, "no OpenCL device found",
                           hint: OpenCLRuntime.availability ?? "install pocl-opencl-icd or a GPU driver's OpenCL ICD")
    }
    if let index {
        guard let d = devices.first(where: { $0.info.index == index }) else {
            throw UsageError("--device \(index) does not exist; `updraft devices` lists 0...\(devices.count - 1)")
        }
        return d
    }
    return devices.first { $0.info.type == .gpu } ?? devices[0]
}

private func reportJSON(_ r: KernelTuner.Report, device: OpenCLDevice, model: String, batch: Int) -> [String: Any] {
    func opt(_ v: Double?) -> Any { v ?? NSNull() }
    return [
        "device": device.info.name, "driver": device.info.driverVersion, "platform": device.info.platformName,
        "key": r.key, "space": r.entry.space, "kernelSourceHash": r.entry.kernelSourceHash, "model": model, "batch": batch,
        "seconds": r.seconds, "skipped": r.skipped.map(\.description),
        "shapes": r.outcomes.map { o -> [String: Any] in
            [
                "problem": o.problem.name, "shape": o.problem.shape.description, "class": o.problem.shape.classKey,
                "flops": o.problem.flops, "tableSeconds": opt(o.tableSeconds), "bestSeconds": opt(o.bestSeconds),
                "clblastSeconds": opt(o.clblastSeconds), "choice": o.best.map { "\($0)" } ?? "table",
                "engine": o.best?.engine.rawValue ?? KernelVariant.Engine.inHouse.rawValue,
                "speedupOverTable": o.tableSeconds.flatMap { t in o.bestSeconds.map { t / $0 } } ?? NSNull(),
                "bestGFLOPs": o.bestSeconds.map { o.problem.flops / $0 * 1e-9 } ?? NSNull(),
                "timed": o.timed, "rejected": o.rejected.map { ["variant": "\($0.0)", "reason": $0.1] },
            ]
        },
    ]
}

/// `updraft tune --cpu`: measures and stores the CPU convolution choices for `graph`'s shapes.
private func tuneCPU(graph: NetworkGraph, modelName: String, batch: Int, threads: Int?, repeats: Int, json: Bool) throws -> Int32 {
    guard repeats >= 1 else { throw UsageError("--repeats must be at least 1, got \(repeats)") }
    if let threads, threads < 1 { throw UsageError("--threads must be at least 1, got \(threads)") }
    let backend = CPUBackend(threads: threads)
    let settings = CPUTunerSettings(backend: backend, repeats: repeats, log: { line in printError("  " + line) })
    let tuner = CPUConvolutionTuner(settings: settings), opTuner = CPUOpTuner(settings: settings)
    let problems = try CPUConvolutionTuner.problems(forTraining: graph, batch: batch)
    let opProblems = try CPUOpTuner.problems(forTraining: graph, batch: batch)
    guard !problems.isEmpty || !opProblems.isEmpty else {
        throw UpdraftError(.invalidArgument, "\(modelName) has no convolution, pooling or inner-product layer to tune",
                           hint: "tune with a model that has them, or leave out --model")
    }
    if let reason = OneDNN.unavailableReason { printError("warning: oneDNN is unavailable (\(reason)); tuning Updraft's own algorithms only") }
    let directory = CacheDirectory.url(environment: ProcessInfo.processInfo.environment)
    let key = CPUConvolutionTuning.machineKey(threads: backend.threadCount)
    printError("tuning \(problems.count) convolution passes of \(modelName) at batch \(batch) on \(key)")
    let (convolutions, outcomes) = try tuner.tune(problems, start: CPUConvolutionTuning.load(directory: directory, machineKey: key) ?? CPUConvolutionTuning())
    printError("tuning \(opProblems.count) pooling and inner-product passes")
    let (tuning, opOutcomes) = try opTuner.tune(opProblems, start: convolutions)
    try tuning.store(directory: directory, machineKey: key)
    if json {
        let rows = outcomes.map { o -> [String: Any] in
            ["layer": o.problem.layer, "pass": o.pass.rawValue, "shape": CPUConvolutionTuning.shapeKey(o.geometry),
             "choice": o.choice.rawValue, "builtIn": o.builtIn.rawValue,
             "milliseconds": Dictionary(uniqueKeysWithValues: o.milliseconds.map { ($0.key.rawValue, $0.value) }),
             "rejected": Dictionary(uniqueKeysWithValues: o.rejected.map { ($0.key.rawValue, $0.value) })]
        }
        let opRows = opOutcomes.map { o -> [String: Any] in
            ["layer": o.problem.layer, "pass": o.pass.rawValue, "shape": o.shape.key, "choice": o.choice.rawValue,
             "milliseconds": Dictionary(uniqueKeysWithValues: o.milliseconds.map { ($0.key.rawValue, $0.value) }),
             "rejected": o.rejected.map { $0 as Any } ?? NSNull()]
        }
        let data = try JSONSerialization.data(withJSONObject: ["key": key, "model": modelName, "batch": batch, "passes": rows,
                                                               "opPasses": opRows],
                                              options: [.prettyPrinted, .sortedKeys])
        print(String(decoding: data, as: UTF8.self))
    } else {
        let changed = outcomes.filter { $0.choice != $0.builtIn }
        print("tuned \(outcomes.count) convolution passes on \(key); stored in \(directory.appendingPathComponent(CPUConvolutionTuning.fileName).path)")
        print("\(changed.count) differ from the built-in rule (\(changed.filter { $0.choice == .onednn }.count) on oneDNN)")
        print("tuned \(opOutcomes.count) pooling and inner-product passes; \(opOutcomes.filter { $0.choice == .onednn }.count) on oneDNN")
    }
    return 0
}
