import Foundation
import UpdraftCore
import UpdraftModel
import UpdraftLayers
import UpdraftPlacement
import UpdraftData

/// The training loop behind an `UpdateTask`: epochs of mini-batches (Core ML's batching), the
/// feature cache, metrics, validation and checkpoints.
final class TrainingSession {
    unowned let task: UpdateTask
    let graph: NetworkGraph
    let training: TrainingGraph
    /// The executors (one, or data-parallel replicas), fallbacks and recovery.
    let devices: TrainingDevices
    /// Times every pass of every layer when the configuration asks for a profile.
    private(set) var profiler: TrainingProfiler?
    /// The executor that answers for the weights: the only one, or the first replica.
    var executor: Executor { devices.primary }
    let hyperparameters: [Hyperparameter]
    var parameters: TrainingParameters
    /// The configuration training runs with: the task's, with the backends it was resolved to.
    let configuration: UpdateConfiguration
    /// The frozen prefix's outputs per training example (and flip variant) and per validation
    /// example: the frozen layers never change, so neither do they.
    private(set) var cache: FeatureCache?
    /// The gradient exchange with the other ranks of an MPI job (nil: one process).
    let exchange: GradientExchange?
    private(set) var lastMetrics: TrainingMetrics?
    /// Seconds `prepareDevices` took before the first step (TrainingSession+Preparation.swift).
    var preparationSeconds: Double?
    /// Whether validation also counts a confusion matrix (a TensorBoard log draws it).
    var recordsConfusion = false
    /// The last validation's confusion matrix, `[true class][predicted class]` counts, when
    /// `recordsConfusion` is on and the model is a cross-entropy classifier.
    private(set) var validationConfusion: [[Int]]?
    /// The last state of the trained tensors known to be finite (see NonFiniteGuard.swift).
    let finiteState = FiniteStateKeeper()
    /// The memory this run reserved in the process's ledger before making its executors (given back by `end`).
    private let admission: MemoryAdmission
    /// Where the run stands: after the last completed mini-batch (a resumed run starts at its checkpoint's).
    private(set) var position = TrainingPosition()
    /// The model's and the data's fingerprints, once a checkpoint needed them.
    var fingerprints: (model: UInt64, data: DataFingerprint)?
    /// The training data as 8-bit samples for pixel upload (nil: it goes as float tensors).
    private(set) var pixelData: PixelBatchProvider?
    /// Staging buffers of pixel batches, training's and validation's, reused across mini-batches.
    private(set) lazy var pixelPool = PixelStagingPool(rowBytes: graph.input.shape.itemCount, batchRows: parameters.miniBatchSize,
                                                       keep: configuration.data.prefetchDepth + 3)

    /// A session for `run`, resolved once (`ResolvedRun.resolve`): its parameters, resume point and
    /// backends are used as they are; what needs the training data (its count, the checkpoint's
    /// data fingerprint, image-only augmentation) is checked here.
    init(task: UpdateTask, run: ResolvedRun) throws {
        self.task = task
        let model = run.model
        guard let graph = run.graph else {
            throw UpdraftError(.invalidModel, "this run has no network to train (a \(model.spec.modelType.name))", hint: "resolve it through ModelKinds.resolve")
        }
        self.graph = graph
        configuration = run.configuration
        var training = try TrainingGraph(graph: graph)
        if configuration.frozenActivationsHalfPrecision {
            guard !training.prefix.isEmpty else {
                throw UpdraftError(.invalidArgument,
                    "half-precision frozen activations (--frozen-fp16) need frozen layers before the first updatable layer; in this model the input goes straight to updatable layer(s) \(graph.updatableLayers.map(\.name).joined(separator: ", "))",
                    hint: "drop --frozen-fp16 (UpdateConfiguration.frozenActivationsHalfPrecision), or freeze the first layers (updraft make-updatable --layers)")
            }
            training.halfPrecisionPrefix = true
        }
        self.training = training
        hyperparameters = graph.hyperparameters
        parameters = run.parameters
        // The run's, else the model's (resolving made sure it has one); a checkpoint that trained with another is refused below.
        let optimizer = configuration.optimizer ?? graph.updateParameters?.optimizer?.kind ?? parameters.optimizer
        try configuration.data.augmentation.validate()
        if configuration.data.augmentation.randomResizedCrop != nil && !(task.trainingData is EpochAugmentedProvider) {
            throw UpdraftError(.invalidArgument, "a random resized crop needs image training data (an image folder or labels file)",
                               hint: "drop the random resized crop for this data")
        }
        guard task.trainingData.count > 0 else {
            throw UpdraftError(.data, "the training data is empty", hint: "give at least one example")
        }
        let resume = run.resume
        if let resume {
            try resume.check(model: model, data: task.trainingData, optimizer: optimizer, configuration: configuration)
            position = resume.position
        }
        // Before any executor allocates: each planned replica's slice of a mini-batch must fit its
        // memory (the preflight's named error), then, beside the process's other tasks, the run waits
        // until the memory it plans to hold is there (DeviceMemoryLedger.swift).
        let planned = Self.plannedReplicas(batchSize: parameters.miniBatchSize, configuration: configuration)
        try Self.preflight(planned, graph: graph, halfPrecisionPrefix: training.halfPrecisionPrefix)
        admission = try DeviceMemoryLedger.shared.admit(
            Self.plannedMemory(planned, graph: graph, halfPrecisionPrefix: training.halfPrecisionPrefix),
            what: "training with a mini-batch of \(parameters.miniBatchSize)",
            stop: { [unowned task] in task.isCancelRequested }, waits: { [unowned task] in task.warn($0) })
        devices = try TrainingDevices(training: training, optimizer: optimizer, configuration: configuration,
                                      start: resume?.state, warn: { [unowned task] in task.warn($0) })
        if configuration.reporting.profile {
            let profiler = TrainingProfiler()
            for replica in devices.replicas { replica.profiler = profiler }
            self.profiler = profiler
        }
        // Before any data moves, again on the replicas that started (a replica that could not start
        // leaves bigger slices to the others).
        let slices = devices.replicas.count == 1 ? [parameters.miniBatchSize]
            : DataParallelism.sliceSizes(count: parameters.miniBatchSize, shares: devices.shares)
        try Self.preflight(zip(devices.replicas, slices).map { ($0.prefixBackend, $0.tailBackend, $1) },
                           graph: graph, halfPrecisionPrefix: training.halfPrecisionPrefix)
        // A random resized crop gives the frozen prefix a new input every epoch: cached features
        // would not be exact, so the cache is off with it.
        let cropped = configuration.data.augmentation.randomResizedCrop != nil
        cache = configuration.featureCache.enabled && !training.prefix.isEmpty && !cropped
            ? try Self.makeCache(training: training, configuration: configuration, trainingCount: task.trainingData.count)
            : nil
        cache?.warn = { [unowned task] in task.warn($0) }
        if cropped && configuration.featureCache.enabled && !training.prefix.isEmpty {
            task.warn("feature cache off: the random resized crop changes the frozen layers' input every epoch, so cached features would not be exact")
        }
        pixelData = Self.pixelSource(task.trainingData, graph: graph, configuration: configuration)
        let (parameters, devices) = (self.parameters, self.devices)
        exchange = try configuration.distributed.map { try Self.makeExchange($0, session: (parameters, devices, task)) }
    }

    /// `data` as a source of 8-bit samples for `graph`'s input, when pixel upload is on and the
    /// samples are the examples' inputs at the input's size; nil otherwise.
    static func pixelSource(_ data: BatchProvider, graph: NetworkGraph, configuration: UpdateConfiguration) -> PixelBatchProvider? {
        guard configuration.pixelUpload, let pixels = data as? PixelBatchProvider, pixels.writesPixels,
              pixels.pixelShape.count == graph.input.shape.itemCount else { return nil }
        return pixels
    }

    private static func makeCache(training: TrainingGraph, configuration config: UpdateConfiguration,
                                  trainingCount: Int) throws -> FeatureCache {
        let lengths = try training.boundary.map { blob in
            guard let shape = training.graph.blobShapes[blob] else {
                throw UpdraftError(.invalidModel, "the boundary blob '\(blob)' has no shape")
            }
            return shape.itemCount
        }
        let a = config.data.augmentation
        let variants = (a.horizontalFlip ? 2 : 1) * (a.verticalFlip ? 2 : 1)
        return FeatureCache(blobs: training.boundary, rowLengths: lengths, hostBudgetBytes: config.featureCache.budgetBytes,
                            deviceBudgetBytes: config.featureCache.deviceBudgetBytes,
                            expectedEntries: trainingCount * variants + (config.data.validationData?.count ?? 0),
                            halfPrecision: config.featureCache.halfPrecision)
    }

    /// The device tier goes with the only executor's tail backend; data-parallel replicas use the host tier.
    private func bindCache() {
        cache?.bind(to: devices.replicas.count == 1 ? devices.primary.tailBackend : nil)
    }

    func train() throws {
        let config = configuration
        let data = task.trainingData
        prepareDevices()
        try task.emit(.trainingBegin, metrics: nil)
        try checkInitialWeights()
        let batchSize = parameters.miniBatchSize, epochs = parameters.epochs
        for epoch in position.epoch..<max(position.epoch, epochs) {
            if stopRequested { return }
            let start = Date()
            let plan = EpochPlan(exampleCount: data.count, batchSize: batchSize, epoch: epoch,
                                 shuffle: parameters.shuffle, seed: parameters.seed, shortLastBatch: config.data.shortLastBatch)
            // A resumed run skips the mini-batches its checkpoint had completed.
            let first = min(position.miniBatch, plan.batches.count)
            let prefetcher = makePrefetcher(batches: Array(plan.batches[first...]), epoch: epoch)
            defer { prefetcher.stop() }
            for (b, indices) in plan.batches.enumerated() where b >= first {
                if stopRequested { return }
                let place = "epoch \(epoch + 1) mini-batch \(b + 1)"
                let result: Executor.BatchResult
                do {
                    let stepStart = DispatchTime.now().uptimeNanoseconds
                    result = try step(indices: indices, epoch: epoch, position: place, prepared: prefetcher.take(b - first))
                    profiler?.recordStep(seconds: Double(DispatchTime.now().uptimeNanoseconds - stepStart) / 1e9)
                } catch let e as NonFiniteLoss {
                    try handleNonFiniteLoss(e.loss, position: place)
                    position.miniBatch += 1  // skipped: a resumed run goes on after it
                    continue
                } catch let stop as RankStop {
                    try stopWithTheOtherRanks(stop)
                }
                position.complete(result)
                var m = TrainingMetrics(epochIndex: epoch, miniBatchIndex: b, lossValue: result.loss)
                m.device = devices.description
                lastMetrics = m
                try task.emit(.miniBatchEnd, metrics: m)
                if let every = config.checkpoints.everyMiniBatches, every > 0, position.steps % every == 0 {
                    try writeCheckpoint()
                }
            }
            try checkWeights(position: "the end of epoch \(epoch + 1)")
            try keepRanksInStep(position: "the end of epoch \(epoch + 1)")
            let (lossSum, correct, seen) = (position.lossSum, position.correct, position.seen)
            var m = TrainingMetrics(epochIndex: epoch, lossValue: position.lastLoss)
            let seconds = Date().timeIntervalSince(start)
            m.meanLoss = lossSum / Double(max(1, seen))
            if training.loss?.kind == .categoricalCrossEntropy { m.trainingAccuracy = Double(correct) / Double(max(1, seen)) }
            m.seconds = seconds
            m.examplesPerSecond = Double(seen) / max(seconds, 1e-9)
            m.device = devices.description
            if let validation = config.data.validationData {
                let (loss, accuracy) = try evaluate(validation, position: "validation after epoch \(epoch + 1)")
                m.validationLoss = loss
                m.validationAccuracy = training.loss?.kind == .categoricalCrossEntropy ? accuracy : nil
            }
            lastMetrics = m
            try task.emit(.epochEnd, metrics: m)
            position.nextEpoch()
            if let every = config.checkpoints.everyEpochs, every > 0, (epoch + 1) % every == 0 {
                try writeCheckpoint()
            }
        }
    }

    /// Whether to stop before the next mini-batch: the task was cancelled; with several ranks, once
    /// every rank knows that one was (the step's exchange carries it), so all stop after the same step.
    private var stopRequested: Bool {
        guard let exchange else { return task.isCancelRequested }
        if exchange.stopAgreed && !task.isCancelRequested { task.cancel() }
        return exchange.stopAgreed
    }

    /// One mini-batch: through the feature cache when it is on, else the whole network; split
    /// between the replicas when training is data parallel.
    /// Loads the epoch's examples ahead on worker threads (decoding images while the device works);
    /// with the feature cache, only those it does not hold.
    private func makePrefetcher(batches: [[Int]], epoch: Int) -> BatchPrefetcher {
        let augmentation = configuration.data.augmentation, data = task.trainingData
        let needed: (Int) -> Bool
        if let cache {
            needed = { i in
                let f = augmentation.flips(epoch: epoch, index: i)
                let variant = augmentation.isIdentity ? 0 : (f.horizontal ? 1 : 0) | (f.vertical ? 2 : 0)
                return !cache.holds(FeatureCache.Key(set: .training, index: i, variant: variant))
            }
        } else {
            needed = { _ in true }
        }
        // Several ranks: each prepares only its own share of every batch.
        let local = exchange.map { exchange in batches.map { exchange.distributed.share(of: $0).local } } ?? batches
        let pixels = pixelData.map { PixelLoader(provider: $0, epoch: epoch, augmentation: augmentation, pool: pixelPool) }
        return BatchPrefetcher(batches: local, depth: configuration.data.prefetchDepth, needed: needed,
                               load: { try augmentation.example(of: data, at: $0, epoch: epoch) }, pixels: pixels)
    }

    private func step(indices: [Int], epoch: Int, position: String, prepared: PreparedBatch) throws -> Executor.BatchResult {
        let augmentation = configuration.data.augmentation
        func example(_ i: Int) throws -> TrainingExample { try prepared.example(i) }
        let parameters = { [unowned self] in self.parameters }
        // Several ranks: this rank's examples of the batch, and every rank's weight in its gradient.
        var rank: RankShare? = nil
        var indices = indices
        if let exchange {
            let share = exchange.distributed.share(of: indices)
            indices = share.local
            rank = RankShare(exchange: exchange, weights: share.weights, wantsToStop: { [unowned task] in task.isCancelRequested })
        }
        let data = task.trainingData
        guard let cache else {
            if pixelData != nil {
                return try devices.step(count: indices.count, position: position, parameters: parameters, rank: rank, prepare: { range in
                    let slice = Array(indices[range])
                    return (try prepared.pixelRows(slice), try slice.map { try data.target(at: $0) })
                }, gradients: { executor, input in try executor.computeGradients(pixels: input.0, targets: input.1) })
            }
            // The examples as they are: each executor stacks them in its own reused staging array.
            return try devices.step(count: indices.count, position: position, parameters: parameters, rank: rank, prepare: { range in
                try indices[range].map(example)
            }, gradients: { executor, examples in try executor.computeGradients(examples: examples) })
        }
        // Feature-cache path: the prefix runs only for examples (and flip variants) not cached yet.
        func variant(_ i: Int) -> Int {
            if augmentation.isIdentity { return 0 }
            let f = augmentation.flips(epoch: epoch, index: i)
            return (f.horizontal ? 1 : 0) | (f.vertical ? 2 : 0)
        }
        // The closures are kept with the steps to take again after a device failure, by `devices`,
        // which the session owns: they refer to the session unowned.
        return try devices.step(count: indices.count, position: position, parameters: parameters, rank: rank, prepare: { [unowned self] range in
            self.bindCache()
            let slice = Array(indices[range])
            let targets = try slice.map { try self.task.trainingData.target(at: $0) }
            let keys = slice.map { FeatureCache.Key(set: .training, index: $0, variant: variant($0)) }
            let cached = self.pixelData != nil
                ? try CachedSlice(keys: keys, cache: cache, pixels: { try prepared.pixelRows($0) })
                : try CachedSlice(keys: keys, cache: cache, example: { try example($0.index) })
            return (cached, targets)
        }, gradients: { [unowned cache] executor, input in
            try executor.computeGradients(cached: input.0, targets: input.1, cache: cache)
        })
    }

    /// Ends the run: what the task keeps (the trained model, the cache's statistics, what the devices
    /// did, and for a cancelled run where it stopped), after which the executors, the cache and the fallbacks are released.
    func end(into model: CoreMLModel, keepResumePoint: Bool) -> EndedRun {
        let trained = Result { try executor.exportModel(into: model) }
        let ended = EndedRun(model: trained, cacheStatistics: cache?.statistics, devices: devices.record,
                             resumePoint: keepResumePoint ? try? checkpoint() : try? finiteResumePoint(),
                             profile: profiler?.profile(sgemmOn: devices.replicas.flatMap { [$0.prefixBackend, $0.tailBackend] }),
                             preparationSeconds: preparationSeconds)
        devices.release()
        cache = nil
        admission.release()
        return ended
    }

    /// Mean loss and accuracy over a data set, in batches of the mini-batch size (no wrap-round),
    /// on the primary replica.
    func evaluate(_ data: BatchProvider, position: String = "validation") throws -> (loss: Double, accuracy: Double) {
        var lossSum = 0.0, correct = 0, seen = 0
        // A confusion matrix (rows: true class, columns: predicted) when asked, for cross-entropy models.
        let classes = training.loss?.kind == .categoricalCrossEntropy && recordsConfusion
            ? training.lossBlob.flatMap { graph.blobShapes[$0]?.itemCount } ?? 0 : 0
        var confusion = [[Int]](repeating: [Int](repeating: 0, count: classes), count: classes)
        /// Runs `body` on the primary executor, keeping predictions while it runs when a matrix is made.
        func onPrimary(_ body: (Executor) throws -> Executor.BatchResult) throws -> Executor.BatchResult {
            try devices.onPrimary(position: position) { executor in
                executor.keepsPredictions = classes > 0
                defer { executor.keepsPredictions = false }
                return try body(executor)
            }
        }
        let size = parameters.miniBatchSize
        let chunks = stride(from: 0, to: data.count, by: size).map { Array($0..<min($0 + size, data.count)) }
        // Several ranks: each evaluates every N-th chunk; the sums are added up over the ranks below.
        let mine = exchange.map { e in chunks.indices.filter { $0 % e.distributed.size == e.distributed.rank } } ?? Array(chunks.indices)
        var results: [Int: (lossSum: Double, correct: Int, count: Int)] = [:]
        let cache = self.cache
        let pixels = Self.pixelSource(data, graph: graph, configuration: configuration)
            .map { PixelLoader(provider: $0, epoch: 0, augmentation: .none, pool: pixelPool) }
        let prefetcher = BatchPrefetcher(batches: mine.map { chunks[$0] }, depth: configuration.data.prefetchDepth,
                                         needed: { i in cache.map { !$0.holds(FeatureCache.Key(set: .validation, index: i, variant: 0)) } ?? true },
                                         load: { try data.example(at: $0) }, pixels: pixels)
        defer { prefetcher.stop() }
        var failure: Error? = nil
        do {
            for (k, c) in mine.enumerated() {
                let indices = chunks[c]
                let prepared = prefetcher.take(k)
                let r: Executor.BatchResult
                if let cache {
                    let keys = indices.map { FeatureCache.Key(set: .validation, index: $0, variant: 0) }
                    let targets = try indices.map { try data.target(at: $0) }
                    r = try onPrimary { executor in
                        self.bindCache()
                        let slice = pixels != nil
                            ? try CachedSlice(keys: keys, cache: cache, pixels: { try prepared.pixelRows($0) })
                            : try CachedSlice(keys: keys, cache: cache, example: { try prepared.example($0.index) })
                        return try executor.evaluate(cached: slice, targets: targets, cache: cache)
                    }
                } else if pixels != nil {
                    let rows = try prepared.pixelRows(indices)
                    let targets = try indices.map { try data.target(at: $0) }
                    r = try onPrimary { try $0.evaluate(pixels: rows, targets: targets) }
                } else {
                    let examples = try indices.map { try prepared.example($0) }
                    r = try onPrimary { try $0.evaluate(examples: examples) }
                }
                lossSum += r.loss * Double(r.count); correct += r.correct; seen += r.count
                results[c] = (r.loss * Double(r.count), r.correct, r.count)
                if classes > 0, let predicted = r.predicted {
                    for (i, p) in zip(indices, predicted) {
                        if case let .classIndex(t)? = try? data.target(at: i), t >= 0, t < classes, p < classes { confusion[t][p] += 1 }
                    }
                }
            }
        } catch where exchange != nil {
            failure = error  // the other ranks hear of it (and stop too) instead of waiting for this rank's sums
        }
        if let exchange {
            (lossSum, correct, seen, confusion) = try exchange.distributed.reduceValidation(
                chunks: chunks.count, mine: results, confusion: confusion, failure: failure.map { firstLine(of: $0) })
        }
        if classes > 0 { validationConfusion = confusion }
        return (lossSum / Double(max(1, seen)), Double(correct) / Double(max(1, seen)))
    }
}

/// What a training run leaves behind once its session is released: the results, not the means.
struct EndedRun {
    /// The model with the trained weights (or why they could not be read back).
    var model: Result<CoreMLModel, Error>
    var cacheStatistics: FeatureCacheStatistics?
    var devices: TrainingDevices.Record
    /// Where a cancelled run stopped, or the last finite step of a run the non-finite guard stopped,
    /// to resume from (`UpdateTask.writeCheckpoint(to:)`).
    var resumePoint: TrainingCheckpoint?
    /// Where the steps' time went, when the run was profiled.
    var profile: TrainingProfile? = nil
    /// Seconds spent preparing the devices before the first step.
    var preparationSeconds: Double? = nil
}
