import Foundation

/// The training loop behind an `UpdateTask`: epochs of mini-batches (Core ML's batching), the
/// feature cache, metrics, validation and checkpoints.
final class TrainingSession {
    unowned let task: UpdateTask
    let graph: NetworkGraph
    let training: TrainingGraph
    let executor: Executor
    let hyperparameters: [Hyperparameter]
    var parameters: TrainingParameters
    let cache: FeatureCache?
    /// The validation set's prefix features: the frozen layers never change, so neither do they.
    let validationCache: FeatureCache?
    private(set) var lastMetrics: TrainingMetrics?

    init(task: UpdateTask) throws {
        self.task = task
        let model = task.originalModel
        graph = try NetworkGraph(model: model)
        training = try TrainingGraph(graph: graph)
        hyperparameters = graph.hyperparameters
        guard let optimizer = graph.updateParameters?.optimizer?.kind else {
            throw UpdraftError(.invalidModel, "the model has no optimizer in its update parameters",
                               hint: "set an SGD or Adam optimizer (coremltools: set_sgd_optimizer / set_adam_optimizer)")
        }
        parameters = try TrainingParameters(optimizer: optimizer, hyperparameters: hyperparameters,
                                            overrides: task.configuration.parameters)
        guard task.trainingData.count > 0 else {
            throw UpdraftError(.data, "the training data is empty", hint: "give at least one example")
        }
        let backends = task.configuration.backends ?? (ReferenceBackend(), ReferenceBackend())
        executor = try Executor(training: training, optimizer: optimizer, prefixBackend: backends.prefix, tailBackend: backends.tail)
        cache = task.configuration.featureCache && !training.prefix.isEmpty
            ? FeatureCache(budgetBytes: task.configuration.featureCacheBudgetBytes) : nil
        validationCache = cache == nil ? nil : FeatureCache(budgetBytes: task.configuration.featureCacheBudgetBytes)
    }

    func train() throws {
        let config = task.configuration
        let data = task.trainingData
        try task.emit(.trainingBegin, metrics: nil)
        let batchSize = parameters.miniBatchSize, epochs = parameters.epochs
        for epoch in 0..<epochs {
            if task.isCancelRequested { return }
            let start = Date()
            let plan = EpochPlan(exampleCount: data.count, batchSize: batchSize, epoch: epoch,
                                 shuffle: parameters.shuffle, seed: parameters.seed, shortLastBatch: config.shortLastBatch)
            var lossSum = 0.0, correct = 0, seen = 0, lastLoss = 0.0
            for (b, indices) in plan.batches.enumerated() {
                if task.isCancelRequested { return }
                let result = try step(indices: indices, epoch: epoch)
                lossSum += result.loss * Double(result.count)
                correct += result.correct
                seen += result.count
                lastLoss = result.loss
                var m = TrainingMetrics(epochIndex: epoch, miniBatchIndex: b, lossValue: result.loss)
                m.device = executor.tailBackend.name
                lastMetrics = m
                try task.emit(.miniBatchEnd, metrics: m)
            }
            var m = TrainingMetrics(epochIndex: epoch, lossValue: lastLoss)
            let seconds = Date().timeIntervalSince(start)
            m.meanLoss = lossSum / Double(max(1, seen))
            if training.loss?.kind == .categoricalCrossEntropy { m.trainingAccuracy = Double(correct) / Double(max(1, seen)) }
            m.seconds = seconds
            m.examplesPerSecond = Double(seen) / max(seconds, 1e-9)
            m.device = executor.tailBackend.name
            if let validation = config.validationData {
                let (loss, accuracy) = try evaluate(validation)
                m.validationLoss = loss
                m.validationAccuracy = training.loss?.kind == .categoricalCrossEntropy ? accuracy : nil
            }
            lastMetrics = m
            try task.emit(.epochEnd, metrics: m)
            if let every = config.checkpointEvery, every > 0, (epoch + 1) % every == 0, let url = config.checkpointURL {
                try task.write(to: url)
            }
        }
    }

    /// One mini-batch: through the feature cache when it is on, else the whole network.
    private func step(indices: [Int], epoch: Int) throws -> Executor.BatchResult {
        let augmentation = task.configuration.augmentation
        func example(_ i: Int) throws -> TrainingExample {
            var e = try task.trainingData.example(at: i)
            if !augmentation.isIdentity { e.input = try augmentation.apply(to: e.input, epoch: epoch, index: i) }
            return e
        }
        guard let cache else {
            let examples = try indices.map(example)
            return try executor.trainStep(try ArrayBatchProvider(examples: examples).batch(at: examples.indices),
                                          parameters: parameters)
        }
        // Feature-cache path: the prefix runs only for examples (and flip variants) not cached yet.
        func variant(_ i: Int) -> Int {
            if augmentation.isIdentity { return 0 }
            let f = augmentation.flips(epoch: epoch, index: i)
            return (f.horizontal ? 1 : 0) | (f.vertical ? 2 : 0)
        }
        let variants = indices.map(variant)
        let stacked = try cachedFeatures(indices: indices, variants: variants, cache: cache, example: example)
        let targets = try indices.map { try task.trainingData.target(at: $0) }
        return try executor.trainStep(features: stacked, targets: targets, parameters: parameters)
    }

    /// The boundary features of `indices` stacked per blob, computing the prefix only for the
    /// (index, variant) pairs the cache does not hold yet.
    private func cachedFeatures(indices: [Int], variants: [Int], cache: FeatureCache,
                                example: (Int) throws -> TrainingExample) throws -> [String: [Float]] {
        var features: [FeatureCache.Key: [String: [Float]]] = [:]
        var missing: [FeatureCache.Key] = []
        for (i, v) in zip(indices, variants) {
            let key = FeatureCache.Key(index: i, variant: v)
            guard features[key] == nil, !missing.contains(key) else { continue }
            if let f = cache.lookup(key) { features[key] = f } else { missing.append(key) }
        }
        if !missing.isEmpty {
            let examples = try missing.map { try example($0.index) }
            let batch = try ArrayBatchProvider(examples: examples).batch(at: examples.indices)
            let computed = try executor.prefixFeatures(batch.inputs)
            for (k, key) in missing.enumerated() {
                var one: [String: [Float]] = [:]
                for (blob, values) in computed {
                    let per = values.count / missing.count
                    one[blob] = Array(values[k * per..<(k + 1) * per])
                }
                features[key] = one
                cache.store(key, one)
            }
        }
        var stacked: [String: [Float]] = [:]
        for blob in training.boundary {
            var v: [Float] = []
            for (i, variant) in zip(indices, variants) { v += features[FeatureCache.Key(index: i, variant: variant)]![blob]! }
            stacked[blob] = v
        }
        return stacked
    }

    /// Mean loss and accuracy over a data set, in batches of the mini-batch size (no wrap-round).
    func evaluate(_ data: BatchProvider) throws -> (loss: Double, accuracy: Double) {
        var lossSum = 0.0, correct = 0, seen = 0
        let size = parameters.miniBatchSize
        for start in stride(from: 0, to: data.count, by: size) {
            let indices = Array(start..<min(start + size, data.count))
            let r: Executor.BatchResult
            if let cache = validationCache {
                let features = try cachedFeatures(indices: indices, variants: indices.map { _ in 0 }, cache: cache,
                                                  example: { try data.example(at: $0) })
                r = try executor.evaluate(features: features, targets: try indices.map { try data.target(at: $0) })
            } else {
                r = try executor.evaluate(try data.batch(at: indices))
            }
            lossSum += r.loss * Double(r.count); correct += r.correct; seen += r.count
        }
        return (lossSum / Double(max(1, seen)), Double(correct) / Double(max(1, seen)))
    }
}
