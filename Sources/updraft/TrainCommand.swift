import Foundation
import Updraft
import UpdraftCommandLine

let trainCommand = CLICommand(CommandSpec(
    name: "train",
    summary: "Fine-tune a Core ML updatable model's updatable layers on a folder of data, or append samples to a k-NN.",
    positionals: "MODEL.mlmodel", minPositionals: 0, maxPositionals: 1,
    options: OptionSpec.table("""
        --train DIR                     training data: one subfolder per class (images), a labels .csv, or inputs.npy + labels.txt or targets.npy
        --labels-csv FILE               training images listed as path,label rows (paths relative to the file), instead of --train
        --validation DIR                validation data, evaluated after every epoch (a folder or a labels .csv)
        --epochs N                      epochs (default: the model's)
        --batch-size N                  mini-batch size (default: the model's; must be an allowed value)
        --learning-rate X               learning rate (default: the model's)
        --momentum X                    SGD momentum (default: the model's)
        --optimizer sgd|adam|adamw      train with this optimizer instead of the model's (adamw: AdamW, past Core ML; the model keeps its own)
        --weight-decay X                weight decay (default 0, AdamW's 0.01): L2 in the gradient for SGD and Adam, decoupled for AdamW; Core ML has none
        --no-shuffle                    keep the data's order every epoch
        --seed S                        shuffling and augmentation seed (default: the model's)
        --augment flip                  random flips: flip (horizontal), vflip, or flip,vflip
        --random-resized-crop MIN,MAX   torchvision's RandomResizedCrop for training images, area fraction MIN...MAX (turns the feature cache off)
        --prefetch N                    mini-batches decoded ahead of training on worker threads (default 2)
        --short-last-batch              keep a short last batch instead of wrapping round (Core ML wraps)
        --no-feature-cache              recompute the frozen layers every epoch
        --feature-cache-device-mib MIB  device memory for cached features before host memory (default: half the GPU's; 0: host only)
        --feature-cache-host-mib MIB    host memory for cached features (default 4096)
        --feature-cache-fp16            keep cached features in half precision: half the memory, fp32 arithmetic
        --frozen-fp16                   keep the frozen layers' activations in half precision: half their memory, fp32 arithmetic
        --skip-unreadable               skip images that fail to decode, with a warning
        --no-fallback                   stop when a device fails instead of going on on the CPU (under mpirun: every rank stops, rank 0 writes a checkpoint)
        --skip-nonfinite                skip a mini-batch whose loss is NaN or infinite (default: stop, saving the last finite step to resume from)
        --out OUT.mlmodel               where to write the trained model (default: MODEL-trained.mlmodel)
        --checkpoint-every N            also write a checkpoint (the model and its .resume state) every N epochs
        --checkpoint-every-batches N    also write a checkpoint every N mini-batches
        --resume CHECKPOINT.mlmodel     continue the run of this checkpoint exactly where it stood (MODEL may then be left out)
        --log FILE.jsonl                write every event as JSON Lines
        --tensorboard DIR               log the run for TensorBoard in DIR (curves, histograms, hyperparameters; made when missing)
        --profile                       time every layer's passes (waiting for each: slower) and print where the step time went, with GFLOP/s, % of the device's SGEMM rate and the engine
        --sidecar FILE.json             also write a JSON summary of the trained weights (interop checks)
        """) + [neighborsOption] + imageDataOptionSpecs + computeOptions + [dataParallelOption],
    discussion: "Defaults come from the model's update parameters. Ctrl-C, SIGTERM and SIGHUP stop after the current mini-batch and save the model trained so far. "
        + "--out, --log, --sidecar and --tensorboard are checked before training starts; a TensorBoard log that cannot be written mid-run is a warning; a checkpoint that cannot be written is a warning. "
        + "A NaN or infinite loss stops training with the last finite step saved with its resume state (continue with --resume once the data is fixed, or resume with --skip-nonfinite to skip the mini-batch). "
        + "If a device fails mid-training (a kernel that does not build, memory that runs out, a device error), training goes on "
        + "from the last completed mini-batch on the other devices or the CPU, with a warning (--no-fallback: it stops instead). "
        + "Under mpirun each rank takes the device of its rank on its host (or its entry of a --device list); rank 0 prints the map. "
        + "A k-NN classifier is updated by appending one sample per example (one pass; --batch-size sets the progress steps); "
        + "a cancelled update keeps what it appended. A GLM classifier (scikit-learn's logistic regression as coremltools converts it) "
        + "is trained by SGD on the host, past Core ML; its file holds no hyperparameters, so they come from the options "
        + "(defaults: learning rate 0.1, 10 epochs, batch size 32)."
)) { args in
    let resume = try args.value("resume").map(ResumeOptions.init)
    guard let modelPath = args.positionals.first ?? resume?.url.path else { throw UsageError("MODEL.mlmodel is required (or --resume CHECKPOINT.mlmodel)") }
    let modelURL = URL(fileURLWithPath: modelPath)
    if args.value("train") != nil && args.value("labels-csv") != nil {
        throw UsageError("give --train or --labels-csv, not both")
    }
    guard let trainPath = args.value("train") ?? args.value("labels-csv") else {
        throw UsageError("--train DIR (or --labels-csv FILE) is required")
    }
    let ranks = try joinRanksIfLaunched()   // nil unless launched by mpirun
    let primary = ranks?.isPrimary ?? true
    let model = try CoreMLModel(contentsOf: modelURL)
    // Every problem at once (the layers Updraft cannot run, grouped, and the update parameters'), as `inspect` lists them.
    let findings = ModelKinds.validate(model)
    for finding in findings { printError("\(finding)") }
    if !findings.errors.isEmpty {
        printError("the model cannot be trained: fix the errors above (see `updraft inspect`)")
        return 1
    }
    // Each value goes to the library as given; the model's kind (`ModelKinds.resolve`) checks it against the model.
    var config = UpdateConfiguration()
    if let v = try args.int("epochs") { config.parameters[.epochs] = .int(Int64(v)) }
    if let v = try args.int("batch-size") { config.parameters[.miniBatchSize] = .int(Int64(v)) }
    if let v = try args.double("learning-rate") { config.parameters[.learningRate] = .double(v) }
    if let v = try args.double("momentum") { config.parameters[.momentum] = .double(v) }
    if let v = try args.double("weight-decay") { config.parameters[.weightDecay] = .double(v) }
    if let name = try args.choice("optimizer", OptimizerKind.all.map(\.rawValue)) { config.optimizer = OptimizerKind(rawValue: name) }
    if let v = try args.int("seed") { config.parameters[.seed] = .int(Int64(v)) }
    if args.flag("no-shuffle") { config.parameters[.shuffle] = .bool(false) }
    try neighborsConfiguration(args, into: &config)
    try computeConfiguration(args, dataParallel: true, into: &config)
    config.checkpoints.resumeFrom = resume?.checkpoint
    config.distributed = ranks
    if args.flag("no-fallback") { config.placement.fallbacks = [] }
    // The job placed: a folder of class folders is counted without reading an image, so a run of a few
    // examples is weighed with the set-up a device would cost (other data: placed per batch).
    config.placement.job = countedExamples(trainPath).map { Scheduler.Job(examples: $0) }
    // The library checks the parameters and chooses the devices now, so a bad value fails before
    // any data is loaded; the task trains this run as resolved.
    var run = try ModelKinds.resolve(model: model, configuration: config)
    let parameters = run.parameters
    func mebibytes(_ flag: String) throws -> Int? {
        guard let mib = try args.int(flag) else { return nil }
        guard mib >= 0, mib <= Int.max >> 20 else { throw UsageError("--\(flag) must be a number of MiB, 0 or more; got \(mib)") }
        return mib << 20
    }
    let deviceCacheBytes = try mebibytes("feature-cache-device-mib"), hostCacheBytes = try mebibytes("feature-cache-host-mib")
    if args.flag("feature-cache-fp16") && args.flag("no-feature-cache") {
        throw UsageError("--feature-cache-fp16 sets how the feature cache keeps features and --no-feature-cache turns it off: give one")
    }

    // Where the results go (rank 0 writes them), checked before any data is read or any step is taken.
    // A resumed run writes on where its checkpoint is, unless told otherwise.
    let out = URL(fileURLWithPath: args.value("out") ?? resume?.url.path
        ?? modelURL.deletingPathExtension().path + "-trained.mlmodel")
    if primary {
        try checkWritable(out, option: args.value("out") != nil ? "--out" : "the output (default --out)")
        if let sidecar = args.value("sidecar") { try checkWritable(URL(fileURLWithPath: sidecar), option: "--sidecar") }
        if let dir = args.value("tensorboard") { try TensorBoardWriter.checkDirectory(URL(fileURLWithPath: dir)) }
    }
    let log = try (primary ? args.value("log") : nil).map {
        try JSONLinesLog(url: URL(fileURLWithPath: $0), notTheSameAs: [modelURL, out, TrainingHistory.url(forModel: out), TrainingCheckpoint.url(forModel: out)]
                            + [args.value("sidecar"), args.value("train"), args.value("validation")].compactMap { $0 }.map { URL(fileURLWithPath: $0) })
    }
    log?.onWriteFailure = { printError("warning: \($0)") }

    var dataOptions = try imageDataOptions(args, input: model.inputImage.map { ($0.width, $0.height) })
    dataOptions.skipUnreadable = args.flag("skip-unreadable")
    let crop = try randomResizedCropOption(args)
    if crop != nil && model.inputImage == nil { throw UsageError("--random-resized-crop applies to image models only") }
    let prefetch = try args.int("prefetch") ?? 2
    guard (1...64).contains(prefetch) else { throw UsageError("--prefetch must be 1...64; got \(prefetch)") }
    let train = try ModelDataset(model: model, path: URL(fileURLWithPath: trainPath), options: dataOptions)
    train.warnings.forEach { printError("warning: \($0)") }
    print("training data: \(train.summary)")
    // The run's other settings: none of them decides where it runs.
    config = run.configuration
    if let v = args.value("validation") {
        let validation = try ModelDataset(model: model, path: URL(fileURLWithPath: v), options: dataOptions)
        validation.warnings.forEach { printError("warning: \($0)") }
        print("validation data: \(validation.summary)")
        config.data.validationData = validation.provider
    }
    if let a = args.value("augment") {
        let parts = Set(a.split(separator: ",").map(String.init))
        guard parts.isSubset(of: ["flip", "hflip", "vflip"]) else {
            throw UsageError("--augment takes flip, vflip or flip,vflip; got '\(a)'")
        }
        config.data.augmentation = ImageAugmentation(horizontalFlip: parts.contains("flip") || parts.contains("hflip"),
                                                verticalFlip: parts.contains("vflip"), seed: parameters.seed)
    }
    config.data.augmentation.randomResizedCrop = crop
    config.data.augmentation.seed = parameters.seed
    config.data.prefetchDepth = prefetch
    config.data.shortLastBatch = args.flag("short-last-batch")
    if args.flag("skip-nonfinite") { config.nonFinite = .skipBatch }
    config.featureCache.enabled = !args.flag("no-feature-cache")
    config.featureCache.deviceBudgetBytes = deviceCacheBytes
    if let hostCacheBytes { config.featureCache.budgetBytes = hostCacheBytes }
    config.featureCache.halfPrecision = args.flag("feature-cache-fp16")
    config.frozenActivationsHalfPrecision = args.flag("frozen-fp16")
    for (flag, setting) in [("checkpoint-every", \UpdateConfiguration.checkpoints.everyEpochs),
                            ("checkpoint-every-batches", \UpdateConfiguration.checkpoints.everyMiniBatches)] {
        guard let every = try args.int(flag) else { continue }
        guard every > 0 else { throw UsageError("--\(flag) must be at least 1") }
        config[keyPath: setting] = every
    }
    run.warnings.forEach { printError("warning: \($0)") }
    if let resume {
        config.resume(from: resume.checkpoint, keeping: resume.settingsGiven(args))
        print(resume.summary)
    }
    // Under mpirun, also where rank 0 writes the last completed step when every rank must stop.
    if config.checkpoints.everyEpochs != nil || config.checkpoints.everyMiniBatches != nil || ranks != nil { config.checkpoints.url = out }
    config.reporting.tensorboardDirectory = args.value("tensorboard").map { URL(fileURLWithPath: $0) }
    config.reporting.profile = args.flag("profile")
    run.configuration = config
    // A k-NN (or a pipeline ending in one) appends samples: no optimizer settings to show. A run without
    // a network (a k-NN, a GLM) keeps no resume state: its model is the whole state.
    let appends = ModelDataset.kNearestNeighbors(learningIn: run.model.spec) != nil, stateless = run.graph == nil
    let progress = TrainingProgressPrinter(epochs: parameters.epochs, batchesPerEpoch: batchesPerEpoch(
        train.provider.count, parameters.miniBatchSize, short: config.data.shortLastBatch), batchSize: parameters.miniBatchSize,
        device: run.description, log: log, hasOptimizer: !appends)
    print("model: \(modelURL.lastPathComponent), " + (run.graph.map { "updatable: " + $0.updatableLayers.map(\.name).joined(separator: ", ") }
        ?? (appends ? "appends one sample per example (k-nearest-neighbors)" : "trains its \(run.model.spec.modelType.name) on the host")))
    // Under mpirun each rank is placed for its share of the mini-batch, as `updraft plan` shows it.
    let placed = run.schedule.map { " (placed for \($0.plan.batchSize) examples each)" } ?? ""
    print("device: \(run.description)\(ranks.map { " on each of \($0.size) ranks (mpirun)\(placed)" } ?? "")"
          + (appends ? "; batch size \(parameters.miniBatchSize)" : "; \(parameters)"))
    if let ranks, let choice = run.rankDevice {
        // Every rank's device (each chose its own by its rank on its host); rank 0 prints them.
        let map = try ranks.deviceMap(device: run.description, choice: choice)
        map.forEach { print($0) }
    }

    let rankPrefix = ranks.map { "\($0.world.name): " } ?? ""   // which rank warns
    let task = UpdateTask(run: run, trainingData: train.provider,
                          handlers: UpdateHandlers(progress: pauseForTestsIfAsked { progress.handle($0) },
                                                  warning: { progress.warn(rankPrefix + $0) }))
    // Ctrl-C, SIGTERM, SIGHUP: stop after the current mini-batch; the completion below saves what was
    // trained. Under mpirun, SIGTERM is the launcher ending the ranks after one died (RankSetup.swift).
    let signals = StopSignals(ranks == nil ? [SIGINT, SIGTERM, SIGHUP] : [SIGINT, SIGHUP]) { s in
        printError("\n\(signalName(s)): finishing the current mini-batch and saving the model")
        task.cancel()
    }
    task.resume()
    let final = task.wait()
    signals.cancel()
    progress.finish(state: final.task.state, error: final.error)
    if primary, let profile = task.profile { print(profile.table(), terminator: "") }
    // Training that stopped on its data (a NaN loss, an example that cannot be read) still has a
    // model worth keeping: the last finite state. Device and other failures leave nothing to trust.
    let dataStop = final.task.state == .failed && (final.error as? UpdraftError)?.kind == .data
    if final.task.state == .failed {
        printError("training failed\(ranks.map { " on \($0.world.name)" } ?? ""): \(final.error.map { "\($0)" } ?? "unknown error")")
        // Every rank stopped on the same error (and rank 0 wrote its checkpoint): end MPI together,
        // rather than leave mpirun to end the ranks still running.
        if let ranks, ranks.world.stoppedTogether { leaveRanks(ranks) }
        if !dataStop { return 1 }
    }
    guard primary else { leaveRanks(ranks); return final.task.state == .cancelled ? 130 : 0 }
    defer { leaveRanks(ranks) }
    if final.task.state == .cancelled && stateless {
        // A k-NN keeps what it appended, a GLM its weights so far; there is nothing to resume.
        try task.write(to: out)
    } else if final.task.state == .cancelled || (dataStop && task.resumePoint != nil) {
        // Where it stopped (or, stopped by the non-finite guard, its last finite step), with the
        // state to resume from (`--resume`).
        do { try task.writeCheckpoint(to: out) } catch {
            printError("warning: no resume state for the model trained so far (\(error))")
            try task.write(to: out)
        }
    } else {
        try task.write(to: out)
        // The run is complete: a resume state beside `out` belongs to an earlier point of it.
        try? FileManager.default.removeItem(at: TrainingCheckpoint.url(forModel: out))
    }
    if let sidecar = args.value("sidecar") {
        try InteropSidecar.write(for: try CoreMLModel(contentsOf: out), to: URL(fileURLWithPath: sidecar))
    }
    let note = dataStop && task.resumePoint != nil
        ? " (training stopped: the model of the last finite step; continue with --resume \(out.path), e.g. with a lower --learning-rate)"
        : dataStop ? " (training stopped: the model as trained so far, with finite weights)"
        : final.task.state == .cancelled && appends ? " (cancelled: the samples appended so far)"
        : final.task.state == .cancelled && stateless ? " (cancelled: the model as trained so far)"
        : final.task.state == .cancelled ? " (cancelled: the model as trained so far; continue with --resume \(out.path))" : ""
    print("wrote \(out.path) and \(TrainingHistory.url(forModel: out).lastPathComponent)\(note)")
    if dataStop { return 1 }
    if final.task.state == .cancelled { return 128 + (signals.received ?? SIGINT) }
    return 0
}

func batchesPerEpoch(_ count: Int, _ batch: Int, short: Bool) -> Int { count / max(1, batch) + (count % max(1, batch) == 0 ? 0 : 1) }

/// The files in the class folders of an image folder `path` (what the scheduler's job counts before
/// any image is read), or nil when `path` is not a folder of folders.
func countedExamples(_ path: String) -> Int? {
    let fm = FileManager.default
    var isFolder: ObjCBool = false
    guard fm.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue,
          let classes = try? fm.contentsOfDirectory(atPath: path) else { return nil }
    var count = 0, folders = 0
    for c in classes where !c.hasPrefix(".") {
        let sub = (path as NSString).appendingPathComponent(c)
        guard fm.fileExists(atPath: sub, isDirectory: &isFolder), isFolder.boolValue,
              let files = try? fm.contentsOfDirectory(atPath: sub) else { continue }
        folders += 1
        count += files.filter { !$0.hasPrefix(".") }.count
    }
    return folders > 0 && count > 0 ? count : nil
}
