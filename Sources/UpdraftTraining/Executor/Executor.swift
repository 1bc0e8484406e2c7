import Foundation
import UpdraftCore
import UpdraftBackends
import UpdraftModel
import UpdraftLayers
import UpdraftData

/// Runs a model's network on backends: the frozen prefix forward only on `prefixBackend`, the
/// trainable tail forward and backward on `tailBackend` (the same backend unless the scheduler
/// splits), then one fused optimizer pass per parameter tensor. No gradient work is done for the
/// frozen prefix. Parameters and optimizer state stay on the device; the host reads back the loss
/// and the correct count of each step, and weights only when asked.
public final class Executor {
    /// The graph split into frozen prefix and trainable tail, with its loss and fusions.
    public let training: TrainingGraph
    /// The model's network, as the training graph holds it.
    public var graph: NetworkGraph { training.graph }
    /// Runs the frozen prefix (forward only) and receives the network input.
    public let prefixBackend: Backend
    /// Runs the trainable tail (forward, backward, optimizer steps) and holds the trained parameters and their state.
    public let tailBackend: Backend
    /// The optimizer applied in each step; its `stateSlots` decide the state buffers kept per trained tensor.
    public let optimizer: any Optimizer.Type

    package typealias Parameters = LayerParameterBuffers
    /// One trained parameter tensor's gradient and optimizer state (one buffer per `optimizer.stateSlots` name).
    struct Slot {
        var gradient: DeviceBuffer
        var state: [DeviceBuffer]
        var count: Int
    }

    var parameters: [String: Parameters] = [:]
    var weightSlots: [String: Slot] = [:]
    var biasSlots: [String: Slot] = [:]
    private var workspaces: [Int: Workspace] = [:]
    private var spareWorkspace: Workspace?
    /// Workspaces of the chunks the first layers run in (`PrefixChunking`), by chunk size.
    var chunkWorkspaces: [Int: Workspace] = [:]
    /// Whether the first layers of the frozen prefix may run a few images at a time on a CPU backend
    /// (`PrefixChunking`; the same results, faster). On unless `UPDRAFT_PREFIX_CHUNKS=off` (to compare).
    public var chunksPrefix = UpdraftEnvironment.process.chunksPrefix
    /// The chunking plan's limits (`TrainingGraph.prefixChunking`); tests set small ones.
    var prefixChunkingLimits = (largeBlobBytes: PrefixChunking.largeBlobBytes, cacheBytes: PrefixChunking.cacheBudgetBytes)
    /// The input preprocessing's per-channel scale and shift, on the backend that receives the input.
    private var preprocessingBuffers: (backend: ObjectIdentifier, scale: DeviceBuffer, shift: DeviceBuffer)?
    private let tailNames: Set<String>
    /// The host array float examples are stacked in before their upload, reused batch after batch
    /// (`Executor+Examples.swift`).
    let inputStaging = InputStaging()
    /// Optimizer steps taken (the `step` an optimizer is handed, e.g. Adam's bias correction), advanced once per training step.
    public internal(set) var stepCount = 0
    /// True after an optimizer pass failed part-way: some tensors hold the new step's values, others
    /// the old ones, so this executor's state cannot be read back to resume from (`captureState`).
    public internal(set) var isMidUpdate = false
    /// Called by backward with an updatable layer's name once its parameter gradients are computed
    /// (queued, on an OpenCL device): a multi-rank run starts exchanging them while backward goes on.
    var gradientsReady: ((String) throws -> Void)?
    /// Each layer's entry of the step's `PassPlan`: whether its forward pass runs or is fused into the
    /// layer before it, its epilogue, residual, concat slice and output blob, and which input gradients
    /// backward computes. None of that depends on the batch, so the plan at batch 1 says it.
    let layerPlans: [String: PassPlan.Entry]
    /// When set, every pass of every layer is timed into it (and waited for): see `TrainingProfile`.
    public var profiler: TrainingProfiler?

    /// Uploads the model's parameters to the backends and allocates the optimizer state (gradient and moment buffers on the tail backend); throws what the backend throws when it cannot allocate.
    public init(training: TrainingGraph, optimizer: any Optimizer.Type, prefixBackend: Backend, tailBackend: Backend) throws {
        self.training = training
        self.optimizer = optimizer
        self.prefixBackend = prefixBackend
        self.tailBackend = tailBackend
        tailNames = Set(training.tail.map(\.name))
        layerPlans = Dictionary(PassPlan(training: training, batch: 1, chunking: nil).entries.map { ($0.layer.name, $0) },
                                uniquingKeysWith: { first, _ in first })
        for layer in training.graph.layers {
            let backend = tailNames.contains(layer.name) ? tailBackend : prefixBackend
            var p = Parameters()
            if let w = layer.weights { p.weights = try backend.makeBuffer(w) }
            if let b = layer.bias { p.bias = try backend.makeBuffer(b) }
            if let (scale, shift) = layer.op.channelScaleShift {
                p.scale = try backend.makeBuffer(scale)
                p.shift = try backend.makeBuffer(shift)
            }
            parameters[layer.name] = p
            if layer.isUpdatable, tailNames.contains(layer.name) {
                if let w = layer.weights { weightSlots[layer.name] = try makeSlot(w.count) }
                if let b = layer.bias { biasSlots[layer.name] = try makeSlot(b.count) }
            }
        }
    }

    /// "cpu", or "<prefix backend> + <tail backend>" when the parts run apart.
    public var deviceName: String { prefixBackend === tailBackend ? tailBackend.name : "\(prefixBackend.name) + \(tailBackend.name)" }

    /// The model's optimizer (`OptimizerKind.stepType`), parts on two backends.
    public convenience init(training: TrainingGraph, optimizer: OptimizerKind, prefixBackend: Backend, tailBackend: Backend) throws {
        try self.init(training: training, optimizer: optimizer.stepType, prefixBackend: prefixBackend, tailBackend: tailBackend)
    }

    /// Convenience: one backend for everything.
    public convenience init(training: TrainingGraph, optimizer: OptimizerKind, backend: Backend) throws {
        try self.init(training: training, optimizer: optimizer.stepType, prefixBackend: backend, tailBackend: backend)
    }

    /// Convenience: one backend for everything, with any optimizer type.
    public convenience init(training: TrainingGraph, optimizer: any Optimizer.Type, backend: Backend) throws {
        try self.init(training: training, optimizer: optimizer, prefixBackend: backend, tailBackend: backend)
    }

    /// A gradient buffer and one zeroed buffer per state slot the optimizer declares.
    private func makeSlot(_ count: Int) throws -> Slot {
        let g = try tailBackend.makeBuffer(count: count)
        let state = try optimizer.stateSlots.map { _ in
            let b = try tailBackend.makeBuffer(count: count)
            try tailBackend.fill(b, with: 0)
            return b
        }
        return Slot(gradient: g, state: state, count: count)
    }

    func weightSlotFor(_ name: String) -> Slot? { weightSlots[name] }
    func biasSlotFor(_ name: String) -> Slot? { biasSlots[name] }

    func workspace(_ batch: Int) -> Workspace {
        if let w = workspaces[batch] { return w }
        let w = Workspace(batch: batch)
        workspaces[batch] = w
        return w
    }

    /// A workspace for a one-off batch size (the prefix on the examples a feature cache misses, whose
    /// count changes from step to step): the workspace of that size if steps use one, else one spare
    /// that a different size replaces, so memory does not grow with every count seen.
    func transientWorkspace(_ batch: Int) -> Workspace {
        if let w = workspaces[batch] { return w }
        if let s = spareWorkspace, s.batch == batch { return s }
        let s = Workspace(batch: batch)
        spareWorkspace = s
        return s
    }

    /// Batch sizes of the workspaces held (tests: memory must not grow with every batch size seen).
    var workspaceBatchSizes: [Int] { workspaces.keys.sorted() + (spareWorkspace.map { [$0.batch] } ?? []) }

    func backend(for layer: GraphLayer) -> Backend { tailNames.contains(layer.name) ? tailBackend : prefixBackend }
    package func params(_ layer: GraphLayer) -> Parameters { parameters[layer.name] ?? Parameters() }

    // MARK: Public API

    /// The result of one step or evaluation batch.
    public struct BatchResult: Sendable {
        /// Mean loss over the batch.
        public var loss: Double
        /// Examples whose first arg-max is the label (classifiers; 0 otherwise).
        public var correct: Int
        /// Examples in the batch.
        public var count: Int
        /// Each example's predicted class (its first arg-max), when the executor keeps predictions
        /// (`keepsPredictions`, cross-entropy evaluation only); nil otherwise.
        public var predicted: [Int]? = nil
    }
    /// Whether evaluation (not training) reads back each example's predicted class (a validation
    /// confusion matrix): one more download per batch of its class scores.
    var keepsPredictions = false

    /// One training step on a batch: forward, loss, backward through the tail, optimizer update.
    public func trainStep(_ batch: TrainingBatch, parameters hyper: TrainingParameters) throws -> BatchResult {
        let result = try computeGradients(batch)
        try applyUpdate(hyper)
        return result
    }

    /// A training step on cached boundary features (the frozen prefix's outputs for this batch):
    /// only the tail runs. `features[blob]` holds the batch's values of each `training.boundary` blob.
    public func trainStep(features: [String: [Float]], targets: [TrainingExample.Target],
                          parameters hyper: TrainingParameters) throws -> BatchResult {
        let result = try computeGradients(features: features, targets: targets)
        try applyUpdate(hyper)
        return result
    }

    /// The first half of a training step: forward, loss and backward, leaving the gradient of the
    /// batch's mean loss in each parameter's gradient buffer (`gradientValues()`), without touching
    /// the parameters or the optimizer state. `applyUpdate` is the second half. Data parallelism
    /// runs this on each replica's slice, combines the gradients, and then updates every replica.
    public func computeGradients(_ batch: TrainingBatch) throws -> BatchResult {
        try runBatch(targets: batch.targets, layers: training.prefix + training.tail, keep: training.boundary, gradients: true) {
            try uploadInput(batch.inputs, ws: $0)
        }
    }

    /// `computeGradients` on cached boundary features: only the tail runs.
    public func computeGradients(features: [String: [Float]], targets: [TrainingExample.Target]) throws -> BatchResult {
        try runBatch(targets: targets, layers: training.tail, gradients: true) { try uploadFeatures(features, ws: $0) }
    }

    /// The second half of a training step: one optimizer pass per parameter tensor with the
    /// gradients now in the gradient buffers (from `computeGradients`, or set by `setGradients`).
    public func applyUpdate(_ hyper: TrainingParameters) throws { try update(hyper) }

    /// Loss and correct count from cached boundary features (validation with the feature cache).
    public func evaluate(features: [String: [Float]], targets: [TrainingExample.Target]) throws -> BatchResult {
        try runBatch(targets: targets, layers: training.tail, gradients: false) { try uploadFeatures(features, ws: $0) }
    }

    /// One batch in the batch's workspace: `stage` sets the inputs of `layers`, then forward, the loss
    /// and, with `gradients`, backward (queued before the host waits for the loss). `keep`: blobs
    /// forward must not release early, besides the loss blob.
    func runBatch(targets: [TrainingExample.Target], layers: [GraphLayer], keep: [String] = [], gradients: Bool,
                  stage: (Workspace) throws -> Void) throws -> BatchResult {
        let ws = workspace(targets.count)
        // A profile covers training steps only, not evaluation.
        let profiling = profiler
        if !gradients { profiler = nil }
        defer {
            profiler = profiling
            ws.clearValues()
            if gradients { ws.clearGradients(on: tailBackend) }
        }
        try profiled(nil, "input", on: layers.first.map { backend(for: $0) } ?? tailBackend, batch: targets.count) { try stage(ws) }
        try forward(layers: layers, ws: ws, keep: Set(keep + [training.lossBlob].compactMap { $0 }))
        let pending = try profiled(nil, "loss", on: tailBackend, batch: targets.count) {
            try queueLoss(ws: ws, targets: targets, withGradient: gradients)
        }
        if gradients { try backward(ws: ws) }
        return try pending.resolve()
    }

    private func uploadFeatures(_ features: [String: [Float]], ws: Workspace) throws {
        for blob in training.boundary {
            guard let values = features[blob] else {
                throw UpdraftError(.invalidArgument, "cached features for blob '\(blob)' are missing")
            }
            let b = try ws.acquire(values.count, on: tailBackend)
            try tailBackend.upload(values, to: b)
            ws.setValue(blob, b, on: tailBackend)
        }
    }

    /// Runs the frozen prefix on a batch and returns its boundary blobs (for the feature cache),
    /// each as the batch's values, `[N] + blob shape`.
    public func prefixFeatures(_ inputs: Tensor) throws -> [String: [Float]] {
        let ws = transientWorkspace(inputs.shape.n)
        defer { ws.clearValues() }
        try uploadInput(inputs, ws: ws)
        try forward(layers: training.prefix, ws: ws, keep: Set(training.boundary))
        var out: [String: [Float]] = [:]
        for blob in training.boundary {
            guard let v = try floatValue(blob, ws: ws) else { throw UpdraftError(.invalidModel, "boundary blob '\(blob)' was not computed") }
            out[blob] = try v.backend.download(v.buffer)
        }
        return out
    }

    /// Loss and correct count without training (validation).
    public func evaluate(_ batch: TrainingBatch) throws -> BatchResult {
        try runBatch(targets: batch.targets, layers: training.prefix + training.tail, gradients: false) {
            try uploadInput(batch.inputs, ws: $0)
        }
    }

    /// The values of `blob` (default: the class probabilities, else the first output) for a batch of
    /// inputs, as `[N] + blob shape`.
    public func predict(_ inputs: Tensor, blob: String? = nil) throws -> Tensor {
        try predict(count: inputs.shape.n, blob: blob) { try uploadInput(inputs, ws: $0) }
    }

    /// `predict` with the batch's input set by `stage`.
    func predict(count: Int, blob: String?, stage: (Workspace) throws -> Void) throws -> Tensor {
        let target = blob ?? defaultOutputBlob
        guard let shape = graph.blobShapes[target] else {
            throw UpdraftError(.invalidArgument, "the network has no blob named '\(target)'")
        }
        var needed: Set<String> = []
        var stack = [target]
        while let b = stack.popLast() {
            guard let p = graph.producer(of: b), !needed.contains(p.name) else { continue }
            needed.insert(p.name); stack.append(contentsOf: p.inputs)
        }
        let ws = workspace(count)
        defer { ws.clearValues() }
        try stage(ws)
        // Fused as in training, unless the blob asked for is one that fusion does not write.
        try forward(layers: graph.layers.filter { needed.contains($0.name) }, ws: ws, keep: [target],
                    fuse: !training.fusionSkips(target))
        guard let v = try floatValue(target, ws: ws) else { throw UpdraftError(.invalidModel, "blob '\(target)' was not computed") }
        return Tensor(shape: shape.withBatch(count), data: Array(try v.backend.download(v.buffer)))
    }

    var defaultOutputBlob: String {
        if !graph.predictedProbabilitiesName.isEmpty, graph.blobShapes[graph.predictedProbabilitiesName] != nil {
            return graph.predictedProbabilitiesName
        }
        return graph.layers.last?.output ?? graph.input.name
    }

    /// A layer's current weights and bias (downloaded from the device).
    public func weights(ofLayer name: String) throws -> (weights: Tensor, bias: Tensor?) {
        guard let layer = graph.layer(named: name), let w = layer.weights, let p = parameters[name], let wb = p.weights else {
            throw UpdraftError(.invalidArgument, "layer '\(name)' has no weights",
                               hint: "layers with weights: \(graph.layers.filter { $0.weights != nil }.map(\.name).joined(separator: ", "))")
        }
        let backend = self.backend(for: layer)
        let weights = Tensor(shape: w.shape, data: try backend.download(wb))
        var bias: Tensor? = nil
        if let b = layer.bias, let bb = p.bias { bias = Tensor(shape: b.shape, data: try backend.download(bb)) }
        return (weights, bias)
    }

    /// Replaces a layer's weights and bias on the device (e.g. restoring a checkpoint).
    public func setWeights(ofLayer name: String, weights: Tensor, bias: Tensor?) throws {
        guard let layer = graph.layer(named: name), let p = parameters[name], let wb = p.weights,
              wb.count == weights.count, (bias == nil) == (p.bias == nil), bias.map({ $0.count == p.bias!.count }) ?? true else {
            throw UpdraftError(.invalidArgument, "weights for layer '\(name)' do not match its shape")
        }
        try backend(for: layer).upload(weights.data, to: wb)
        if let bias, let bb = p.bias { try backend(for: layer).upload(bias.data, to: bb) }
    }

    /// `model` with every updatable layer's weights and bias replaced by the trained values.
    public func exportModel(into model: CoreMLModel) throws -> CoreMLModel {
        var m = model
        for layer in graph.updatableLayers {
            let (w, b) = try weights(ofLayer: layer.name)
            try m.setWeights(w, ofLayer: layer.name)
            if let b { try m.setBias(b, ofLayer: layer.name) }
        }
        return m
    }

    /// Gradients of the last step for an updatable layer (tests, data-parallel reduction).
    public func gradients(ofLayer name: String) throws -> (weights: [Float], bias: [Float]?) {
        guard let w = weightSlots[name] else { throw UpdraftError(.invalidArgument, "layer '\(name)' is not updatable") }
        return (try tailBackend.download(w.gradient), try biasSlots[name].map { try tailBackend.download($0.gradient) })
    }

    // MARK: Input

    func preprocessing(on backend: Backend, scale: Float, bias: [Float]) throws -> (scale: DeviceBuffer, shift: DeviceBuffer) {
        if let p = preprocessingBuffers, p.backend == ObjectIdentifier(backend) { return (p.scale, p.shift) }
        let made = (scale: try backend.makeBuffer([Float](repeating: scale, count: bias.count)), shift: try backend.makeBuffer(bias))
        preprocessingBuffers = (ObjectIdentifier(backend), made.scale, made.shift)
        return made
    }

    func uploadInput(_ inputs: Tensor, ws: Workspace) throws {
        let itemCount = graph.input.shape.itemCount
        guard inputs.shape.n == ws.batch, inputs.count == ws.batch * itemCount else {
            throw UpdraftError(.data, "inputs \(inputs.shape) do not match the model input \(graph.input.shape) (batch \(ws.batch))",
                               hint: "check the data's shape against `updraft inspect`")
        }
        try uploadInput(values: inputs.data, ws: ws)
    }

    /// Sets the network input of `ws` from `values`, `ws.batch` examples of the input's size stacked.
    func uploadInput(values: [Float], ws: Workspace) throws {
        let itemCount = graph.input.shape.itemCount
        let backend = training.prefix.isEmpty ? tailBackend : prefixBackend
        let b = try ws.acquire(values.count, on: backend)
        try backend.upload(values, to: b)
        // The image preprocessing, x = scale * x + bias[channel], on the device, in place: the batch
        // crosses to the device once and is not copied on the host.
        if let pre = graph.input.preprocessing, !pre.bias.isEmpty {
            let channels = pre.bias.count
            let affine = try preprocessing(on: backend, scale: pre.scale, bias: pre.bias)
            try backend.channelAffine(Shape(n: ws.batch, c: channels, h: itemCount / channels, w: 1), input: b,
                                      scale: affine.scale, shift: affine.shift, output: b)
        }
        ws.setValue(graph.input.name, b, on: backend)
    }
}

/// What the layer kinds (Layers/) ask of the executor that runs them.
extension Executor: LayerContext {
    package func parameterGradients(_ layer: GraphLayer) -> (weights: DeviceBuffer, bias: DeviceBuffer?)? {
        guard layer.isUpdatable, let slot = weightSlotFor(layer.name) else { return nil }
        return (slot.gradient, biasSlotFor(layer.name)?.gradient)
    }

    package func parameterGradientsReady(_ layer: GraphLayer) throws { try gradientsReady?(layer.name) }
}
