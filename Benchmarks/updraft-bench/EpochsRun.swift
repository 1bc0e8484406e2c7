import Foundation
import Updraft

/// The workload of `updraft-bench epochs`. By default SqueezeNet 1.1 at 227x227, 10 classes, conv10 and
/// fullyconnected0 trained with SGD (momentum 0.9, learning rate 0.001), mini-batch 64, on seeded
/// synthetic images — the same as Benchmarks/pytorch_baseline.py. With `--model M.mlmodel`, that
/// updatable model with its own optimizer and updatable layers, on synthetic data shaped for its input
/// (or the files of `--data`).
struct EpochsWorkload {
    static let squeezeNetInputSize = 227
    static let dataSeed: UInt64 = 1

    /// The model as read or built, before the per-run epoch count is set.
    var base: CoreMLModel
    /// The file it came from (nil: SqueezeNet built in memory).
    var path: String?
    /// What the report calls the model, and the layers that train.
    var modelName: String
    var trained: [String]
    /// One example, `[C, H, W]`.
    var itemShape: Shape
    /// `--frozen-fp16`: the frozen prefix's activations as halves (`UpdateConfiguration.frozenActivationsHalfPrecision`).
    var frozenHalf = false
    var classes: Int
    var batch: Int
    var optimizer: String
    var learningRate: Double?
    var momentum: Double?
    /// Parameter overrides every run applies (SqueezeNet's SGD settings; none for a model file).
    var overrides: [ParameterKey: ParameterValue]
    /// The same network in torchvision for `--compare-pytorch` (nil: the script's SqueezeNet), and
    /// whether its ReLU6s are ReLUs (models made by `make_bench_models.py --compat`).
    var torchvisionArch: String?
    var relu6AsReLU: Bool

    var inputDescription: String { "\(itemShape[1])x\(itemShape[2])x\(itemShape[0])" }
    var title: String { "\(modelName) fine-tuning (\(trained.joined(separator: " + ")))" }

    static func squeezeNet() throws -> EpochsWorkload {
        let size = squeezeNetInputSize, classes = 10
        let base = try SqueezeNet.build(SqueezeNet.Options(labels: (0..<classes).map(String.init), seed: 0, inputSize: size))
        return EpochsWorkload(
            base: base, path: nil, modelName: "SqueezeNet 1.1", trained: ["conv10", "fullyconnected0"],
            itemShape: [3, size, size], classes: classes, batch: 64, optimizer: "sgd", learningRate: 0.001, momentum: 0.9,
            overrides: [.miniBatchSize: .int(64), .momentum: .double(0.9), .learningRate: .double(0.001)],
            torchvisionArch: nil, relu6AsReLU: false)
    }

    /// An updatable model file, trained with its own optimizer and loss; `batch` replaces its mini-batch size.
    static func load(path: String, batch: Int?) throws -> EpochsWorkload {
        let model = try CoreMLModel(contentsOf: URL(fileURLWithPath: path))
        let graph = try NetworkGraph(model: model)
        guard let update = graph.updateParameters, let optimizer = update.optimizer, let loss = graph.loss else {
            throw UpdraftError(.invalidModel, "\(path) is not an updatable model (no update parameters or no loss)",
                               hint: "make it updatable first (coremltools' NeuralNetworkBuilder.make_updatable)")
        }
        let classes: Int
        switch loss.targetEncoding {
        case let .classLabel(labels): classes = labels.count
        case .classIndex: classes = loss.inputShape.dims.last { $0 > 1 } ?? 1
        case .values:
            throw UpdraftError(.unsupported, "\(path) trains with a mean-squared-error loss: synthetic data has class labels only",
                               hint: "give --data DIR with inputs.npy and targets.npy")
        }
        let dims = graph.input.shape.dims
        let item = Shape(Array(dims.count == 4 ? dims.dropFirst() : dims[...]))
        guard item.rank == 3 else {
            throw UpdraftError(.unsupported, "\(path): input \(graph.input.name) has shape \(graph.input.shape); the benchmark makes [C, H, W] examples")
        }
        let modelBatch = optimizer.miniBatchSize.map { Int($0.defaultValue) } ?? 64
        let b = batch ?? modelBatch
        guard b >= 1 else { throw UpdraftError(.invalidArgument, "--batch-size must be at least 1, got \(b)") }
        let meta = Dictionary(model.spec.description.metadata.userDefined.map { ($0.key, $0.value) }, uniquingKeysWith: { a, _ in a })
        return EpochsWorkload(
            base: model, path: path, modelName: URL(fileURLWithPath: path).lastPathComponent,
            trained: graph.updatableLayers.map(\.name), itemShape: item, classes: classes, batch: b,
            optimizer: optimizer.kind.rawValue, learningRate: optimizer.learningRate?.defaultValue,
            momentum: optimizer.momentum?.defaultValue, overrides: [:],
            torchvisionArch: meta["updraft.bench.torchvision"], relu6AsReLU: meta["updraft.bench.relu6"] == "relu")
    }

    /// The model with `epochs` as its default and only allowed epoch count, and the workload's
    /// mini-batch size as its default and only allowed one (set in memory: a benchmark may run any
    /// size; the SqueezeNet builder allows 1, 10 or 50 epochs only).
    func model(epochs: Int) throws -> CoreMLModel {
        var spec = base.spec
        guard var update = spec.network.updateParameters else {
            throw UpdraftError(.invalidModel, "\(modelName) has no update parameters")
        }
        update.epochs = Int64Parameter(defaultValue: Int64(epochs), allowed: .set([Int64(epochs)]))
        if path != nil, update.optimizer != nil {
            update.optimizer?.miniBatchSize = Int64Parameter(defaultValue: Int64(batch), allowed: .set([Int64(batch)]))
        }
        spec.network.updateParameters = update
        return CoreMLModel(spec: spec)
    }

    /// The image files of `dir` (class folders), prepared as `updraft train` prepares them.
    func fileDataset(dir: String) throws -> BatchProvider {
        try ModelDataset(model: model(epochs: 1), path: URL(fileURLWithPath: dir)).provider
    }

    func dataset(images: Int) throws -> SyntheticImageDataset {
        try SyntheticImageDataset(count: images, itemShape: itemShape, classes: classes, seed: Self.dataSeed)
    }
}

/// Where one run trains: the CPU backend, or one OpenCL device.
struct EpochsTarget: Hashable {
    /// Core ML's compute-units setting that selects this target: cpuOnly, cpuAndGPU (GPUs) or all.
    var computeUnits: String
    /// nil for the CPU backend.
    var openCLIndex: Int?
    var deviceName: String
    var deviceKind: String   // "cpu" for the CPU backend, else the OpenCL device type

    var label: String { openCLIndex.map { "opencl \($0)" } ?? "cpu" }
}

/// One configuration's measurements (one object of `--json`'s "runs").
struct EpochsRunResult: Codable {
    var computeUnits: String
    var device: String
    var deviceIndex: Int?
    var deviceKind: String
    var backend: String
    var featureCache: Bool
    var images: Int
    var batch: Int
    var epochs: Int
    var threads: Int?
    /// Images trained per epoch: whole mini-batches, the last filled by wrapping round (Core ML).
    var imagesPerEpoch: Int
    /// Preparing the devices before the first epoch (`UpdateTask.preparationSeconds`: e.g. the CPU's
    /// oneDNN primitives), outside every epoch's time; nil where the run prepares nothing.
    var setupMilliseconds: Double?
    var epochMilliseconds: [Double]
    /// Minor page faults of the process in each epoch (first-touched memory: activations, scratch).
    var epochMinorFaults: [Int]?
    /// CPU seconds (user + system, all threads) of the process in each epoch: on a shared machine a
    /// steadier measure of the work than the wall-clock times.
    var epochCPUSeconds: [Double]?
    var firstEpochMilliseconds: Double
    /// Best of the epochs after the first (as pytorch_baseline.py); the first epoch when there is one only.
    var steadyEpochMilliseconds: Double
    var firstEpochImagesPerSecond: Double
    /// Steady state.
    var imagesPerSecond: Double
    var gflopPerImageSteady: Double
    var gflopPerImageFirst: Double
    var effectiveGflopsFirst: Double
    var effectiveGflops: Double
    var meanLoss: [Double]
    var peakHostBytes: Int?
    var peakHostScope: String
    var datasetBytes: Int
    /// What the feature cache held at the end (0 without the cache): all of it, and the part in
    /// device memory (the tier on the backend that runs the tail; host memory on the CPU and PoCL).
    var featureCacheBytes: Int
    var featureCacheDeviceBytes: Int
    /// Where the cache's device tier lived ("cpu", "opencl:…"), nil without one.
    var featureCacheDevice: String?
    /// Peak bytes in buffers the executor made through the backend; device memory for OpenCL.
    var backendBufferBytes: Int
    var deviceMemoryBytes: Int?
    /// Bytes the host sent to the backend per mini-batch in the first epoch (images as floats or as
    /// 8-bit samples, labels, cached features; `UPDRAFT_PIXEL_UPLOAD=off` sends image floats).
    var firstEpochUploadBytesPerStep: Int
    /// With --op-times: per epoch, the time in each backend op.
    var opBreakdown: [EpochBreakdown]?
    /// CPU runs: `CPUCalibration.gemmGflops`, measured right after the run (so as not to count in its peak memory).
    var referenceGemmGflops: Double?
    /// With --profile: where the steady epochs' steps spent their time, per layer and pass.
    var profile: TrainingProfile?

    enum CodingKeys: String, CodingKey {
        case computeUnits = "compute_units", device, deviceIndex = "device_index", deviceKind = "device_kind", backend
        case featureCache = "feature_cache", images, batch, epochs, threads
        case imagesPerEpoch = "images_per_epoch", setupMilliseconds = "setup_ms", epochMilliseconds = "epoch_ms"
        case epochMinorFaults = "epoch_minor_faults", epochCPUSeconds = "epoch_cpu_seconds"
        case firstEpochMilliseconds = "first_epoch_ms", steadyEpochMilliseconds = "steady_epoch_ms"
        case firstEpochImagesPerSecond = "first_epoch_images_per_second", imagesPerSecond = "images_per_second"
        case gflopPerImageSteady = "gflop_per_image_steady", gflopPerImageFirst = "gflop_per_image_first"
        case effectiveGflopsFirst = "first_epoch_gflops", effectiveGflops = "steady_gflops"
        case meanLoss = "mean_loss", peakHostBytes = "peak_host_bytes", peakHostScope = "peak_host_scope"
        case datasetBytes = "dataset_bytes", featureCacheBytes = "feature_cache_bytes"
        case featureCacheDeviceBytes = "feature_cache_device_bytes", featureCacheDevice = "feature_cache_device"
        case backendBufferBytes = "backend_buffer_bytes", deviceMemoryBytes = "device_memory_bytes"
        case opBreakdown = "op_times", referenceGemmGflops = "reference_sgemm_gflops", profile
        case firstEpochUploadBytesPerStep = "first_epoch_upload_bytes_per_step"
    }
}

/// Where one epoch's time went (--op-times): milliseconds and calls per op kind and shape, and the
/// time outside backend ops (batching, the feature cache, host-side copies, the training loop).
struct EpochBreakdown: Codable {
    struct Op: Codable { var op: String; var ms: Double; var calls: Int }
    var epochMilliseconds: Double
    var outsideOpsMilliseconds: Double
    var ops: [Op]

    enum CodingKeys: String, CodingKey {
        case epochMilliseconds = "epoch_ms", outsideOpsMilliseconds = "outside_ops_ms", ops
    }

    init(epochSeconds: Double, ops: [String: MeasuringBackend.OpTime]) {
        self.ops = ops.map { Op(op: $0.key, ms: $0.value.seconds * 1e3, calls: $0.value.calls) }.sorted { $0.ms > $1.ms }
        epochMilliseconds = epochSeconds * 1e3
        outsideOpsMilliseconds = epochMilliseconds - self.ops.reduce(0) { $0 + $1.ms }
    }
}

/// Runs one configuration in this process: builds the model and data, trains `epochs` epochs through
/// `UpdateTask`, and times each epoch from the task's epochEnd metrics.
/// With `opTimes`, each backend op is timed (and waited for) and every epoch's breakdown is kept.
/// With `distributed`, this process trains as one rank of an MPI job (`epochs --mpi`).
func runEpochs(workload: EpochsWorkload, target: EpochsTarget, featureCache: Bool, images: Int, epochs: Int,
               peakScope: String, opTimes: Bool, profile: Bool = false,
               dataDir: String? = nil, distributed: DistributedTraining? = nil, cpuThreads: Int? = nil,
               progress: @escaping (String) -> Void) throws -> EpochsRunResult {
    let model = try workload.model(epochs: epochs)
    let data: BatchProvider = try dataDir.map { try workload.fileDataset(dir: $0) } ?? workload.dataset(images: images)
    let inner: Backend
    var threads: Int? = nil
    if let index = target.openCLIndex {
        let devices = try OpenCLRuntime.devices()
        guard let device = devices.first(where: { $0.info.index == index }) else {
            throw UpdraftError(.invalidArgument, "no OpenCL device with index \(index)",
                               hint: "see `updraft devices` for the indices")
        }
        inner = try OpenCLBackend(device: device)
    } else {
        let cpu = CPUBackend(threads: cpuThreads)
        threads = cpu.threadCount
        inner = cpu
    }
    // Handlers run on the training thread while this thread waits in task.run(): what they record
    // is read only after it returns.
    nonisolated(unsafe) let backend = MeasuringBackend(inner)
    backend.timing = opTimes

    // The target's device, measured, is given as the backends: the library resolves the run
    // (parameters checked once) without scheduling it, as it does for `updraft train`.
    var config = UpdateConfiguration()
    config.parameters = workload.overrides
    config.placement.backends = (backend, backend)
    config.featureCache.enabled = featureCache
    config.frozenActivationsHalfPrecision = workload.frozenHalf
    config.distributed = distributed
    config.reporting.profile = profile
    nonisolated(unsafe) var firstEpochProfile: TrainingProfile?
    nonisolated(unsafe) var seconds: [Double] = []
    nonisolated(unsafe) var faults: [Int] = [], cpuSeconds: [Double] = []
    nonisolated(unsafe) var faultsBefore = ProcessMemory.minorFaults(), cpuBefore = ProcessMemory.cpuSeconds()
    nonisolated(unsafe) var losses: [Double] = []
    let tag = "\(target.computeUnits) \(target.label) cache \(featureCache ? "on" : "off")\(workload.frozenHalf ? " frozen fp16" : "")"
    nonisolated(unsafe) var breakdowns: [EpochBreakdown] = []
    nonisolated(unsafe) var firstEpochUploadBytes = 0
    nonisolated(unsafe) let progress = progress
    let handlers = UpdateHandlers(events: [.trainingBegin, .epochEnd], progress: { context in
        guard context.event == .epochEnd else {
            _ = backend.takeOpTimes(); _ = backend.takeUploadedBytes(); faultsBefore = ProcessMemory.minorFaults()
            cpuBefore = ProcessMemory.cpuSeconds(); return
        }
        guard let m = context.metrics else { return }
        let faultsNow = ProcessMemory.minorFaults()
        faults.append(faultsNow - faultsBefore)
        faultsBefore = faultsNow
        let cpuNow = ProcessMemory.cpuSeconds()
        cpuSeconds.append(cpuNow - cpuBefore)
        cpuBefore = cpuNow
        let uploaded = backend.takeUploadedBytes()
        if m.epochIndex == 0 { firstEpochUploadBytes = uploaded; firstEpochProfile = context.task.profile }
        if opTimes { breakdowns.append(EpochBreakdown(epochSeconds: m.seconds ?? 0, ops: backend.takeOpTimes())) }
        let s = m.seconds ?? 0
        seconds.append(s)
        losses.append(m.meanLoss ?? m.lossValue)
        progress("  \(tag): epoch \(m.epochIndex + 1)  " + String(format: "%.0f ms  %.1f images/s  loss %.4f", s * 1e3,
                                                                      m.examplesPerSecond ?? 0, m.meanLoss ?? m.lossValue))
    })
    let run = try ModelKinds.resolve(model: model, configuration: config)
    let task = UpdateTask(run: run, trainingData: data, handlers: handlers)
    let done = task.run()
    if let error = done.error { throw error }
    guard seconds.count == epochs else {
        throw UpdraftError(.device, "training ended after \(seconds.count) of \(epochs) epochs (\(task.state))")
    }
    if let bad = losses.first(where: { !$0.isFinite }) {
        throw UpdraftError(.device, "the training loss is \(bad): the \(backend.name) backend computed garbage")
    }

    guard let graph = run.graph else { throw UpdraftError(.unsupported, "updraft-bench epochs times neural networks; this model has none") }
    let training = try TrainingGraph(graph: graph)
    let work = try StepWork(training: training, batch: workload.batch)
    let batches = (images + workload.batch - 1) / workload.batch
    let perEpoch = batches * workload.batch
    let first = seconds[0]
    let steady = seconds.count > 1 ? seconds.dropFirst().min()! : first
    // With the cache, the first epoch runs the prefix once per distinct example and the tail per
    // trained image; later epochs run the tail only.
    // Past its byte budgets the cache keeps no more examples; the others run the prefix every epoch.
    let stats = task.featureCacheStatistics
    let cached = stats.map { $0.deviceEntries + $0.hostEntries } ?? 0
    let distinct = min(images, perEpoch)
    let firstWork = featureCache ? Double(distinct) * work.prefixForward + Double(perEpoch) * work.cachedStep
                                 : Double(perEpoch) * work.fullStep
    let steadyPerImage = featureCache && seconds.count > 1
        ? work.cachedStep + Double(max(0, distinct - cached)) / Double(distinct) * work.prefixForward
        : firstWork / Double(perEpoch)
    var result = EpochsRunResult(
        computeUnits: target.computeUnits, device: target.deviceName, deviceIndex: target.openCLIndex,
        deviceKind: target.deviceKind, backend: backend.name, featureCache: featureCache, images: images,
        batch: workload.batch, epochs: epochs, threads: threads, imagesPerEpoch: perEpoch,
        setupMilliseconds: task.preparationSeconds.map { $0 * 1e3 },
        epochMilliseconds: seconds.map { $0 * 1e3 }, epochMinorFaults: faults, epochCPUSeconds: cpuSeconds, firstEpochMilliseconds: first * 1e3,
        steadyEpochMilliseconds: steady * 1e3,
        firstEpochImagesPerSecond: Double(perEpoch) / max(first, 1e-9),
        imagesPerSecond: Double(perEpoch) / max(steady, 1e-9),
        gflopPerImageSteady: steadyPerImage / 1e9, gflopPerImageFirst: firstWork / Double(perEpoch) / 1e9,
        effectiveGflopsFirst: firstWork / max(first, 1e-9) / 1e9,
        effectiveGflops: steadyPerImage * Double(perEpoch) / max(steady, 1e-9) / 1e9,
        meanLoss: losses, peakHostBytes: ProcessMemory.peakResidentBytes(), peakHostScope: peakScope,
        datasetBytes: (data as? SyntheticImageDataset)?.byteCount ?? 0,
        featureCacheBytes: stats.map { $0.deviceBytes + $0.hostBytes } ?? 0,
        featureCacheDeviceBytes: stats?.deviceBytes ?? 0, featureCacheDevice: stats?.deviceName,
        backendBufferBytes: backend.peakBytes,
        deviceMemoryBytes: target.openCLIndex == nil ? nil : backend.peakBytes,
        firstEpochUploadBytesPerStep: firstEpochUploadBytes / max(1, batches),
        opBreakdown: opTimes ? breakdowns : nil)
    // The steady state's profile: the epochs after the first (all of them for a one-epoch run).
    if let whole = task.profile { result.profile = firstEpochProfile.flatMap { epochs > 1 ? whole.since($0) : nil } ?? whole }
    if target.openCLIndex == nil { result.referenceGemmGflops = CPUCalibration.gemmGflops(threads: threads) }
    return result
}

/// What the CPU's SGEMM delivers right now, for judging a CPU run on a shared machine: the CPU
/// backend's inner product on conv10's GEMM shape (M = 64·14·14, N = 1000, K = 512; one OpenBLAS
/// GEMM split over the threads), best of three: `TrainingProfile.measureSGEMM`, which profiles use too.
enum CPUCalibration {
    static func gemmGflops(threads: Int?) -> Double? { TrainingProfile.measureSGEMM(on: CPUBackend(threads: threads)) }
}

/// The process's resident memory, now and at its peak.
enum ProcessMemory {
    /// VmHWM from /proc/self/status, else getrusage's ru_maxrss.
    static func peakResidentBytes() -> Int? {
        if let bytes = status("VmHWM:") { return bytes }
        var usage = rusage()
        guard getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage) == 0 else { return nil }
        return Int(usage.ru_maxrss) * 1024
    }

    /// Hands the heap's free pages back to the system (glibc's `malloc_trim(0)`, looked up at run
    /// time: Swift's Glibc module does not declare it); nothing where there is no such function.
    static func trimHeap() {
        guard let symbol = dlsym(nil, "malloc_trim") else { return }
        _ = unsafeBitCast(symbol, to: (@convention(c) (Int) -> Int32).self)(0)
    }

    /// Minor page faults of the process so far (getrusage's ru_minflt).
    static func minorFaults() -> Int { usage().map { Int($0.ru_minflt) } ?? 0 }

    /// CPU seconds the process used so far, user and system, all threads.
    static func cpuSeconds() -> Double {
        guard let u = usage() else { return 0 }
        let seconds = { (t: timeval) in Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return seconds(u.ru_utime) + seconds(u.ru_stime)
    }

    private static func usage() -> rusage? {
        var usage = rusage()
        return getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage) == 0 ? usage : nil
    }

    /// Resident memory now: VmRSS from /proc/self/status (nil where there is none).
    static func residentBytes() -> Int? { status("VmRSS:") }

    /// A "Name:  N kB" line of /proc/self/status, in bytes.
    private static func status(_ name: String) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix(name) }) else { return nil }
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        return fields.count >= 2 ? Int(fields[1]).map { $0 * 1024 } : nil
    }
}
