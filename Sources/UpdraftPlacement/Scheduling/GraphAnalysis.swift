import UpdraftCore
import UpdraftModel
import UpdraftLayers

/// What the scheduler needs to know about a graph at one batch size, independent of devices: the
/// layers training runs (the executor's `TrainingGraph`: its frozen prefix and trainable tail,
/// conv + ReLU fusion), which of them run backward, each one's kernels, the tensors that cross
/// between memories, and the memory each part needs. A graph that cannot be trained (no loss, no
/// updatable layer) is planned forward only, every layer in the prefix.
package struct GraphAnalysis {
    let graph: NetworkGraph
    let batch: Int
    /// The layers that run, in execution (topological) order.
    let layers: [GraphLayer]
    /// Per entry of `layers`: in the frozen prefix (forward only) rather than the tail.
    let inPrefix: [Bool]
    /// Per entry of `layers`: it computes gradients (its inputs', its parameters', or both).
    let runsBackward: [Bool]
    /// Per entry of `layers`: a ReLU applied by the convolution before it (no forward kernel).
    let fusedIntoConvolution: [Bool]
    let work: [LayerWork]
    /// The loss, when training is possible.
    let loss: GraphLoss?
    /// Why the graph is planned forward only.
    let forwardOnlyReason: String?
    let inputBytes: Int
    let targetBytes: Int
    let outputBytes: Int
    /// Blobs the prefix (or the network input) hands to the tail, with their size per batch.
    let boundary: [(blob: String, bytes: Int)]
    let prefixMemory: UInt64
    let tailMemory: UInt64
    /// Stands for host memory in transfers (where batches arrive and losses are read).
    let hostMemory = DeviceProfile(name: "host memory", kind: .cpu, openCLIndex: nil, fmaGFLOPS: 1, bandwidthGBps: 1,
                                   launchLatencyMicroseconds: 0, memoryBytes: 0, transferGBps: 1)

    var hasPrefix: Bool { inPrefix.contains(true) }
    var hasTail: Bool { inPrefix.contains(false) }
    /// The tail's own copy of the boundary blobs when it runs on another device.
    var boundaryBytes: UInt64 { boundary.reduce(0) { $0 + UInt64($1.bytes) } }

    /// `halfPrecisionPrefix`: the frozen prefix stores its activations as halves
    /// (`TrainingGraph.halfPrecisionPrefix`), and the boundary blobs are widened to floats for the tail.
    package init(graph: NetworkGraph, batch: Int, halfPrecisionPrefix: Bool = false) throws {
        // Every count, byte and FLOP figure below is a per-example size times `batch`: bounded here.
        try SizeLimits.checkBatchSize(batch, graph: graph, source: "the mini-batch size")
        self.graph = graph
        self.batch = batch
        let optimizer = graph.updateParameters?.optimizer?.kind ?? .sgd

        var layers: [GraphLayer], inPrefix: [Bool], runsBackward: [Bool], fused: [Bool]
        var wantsGradient: (String) -> Bool
        var boundaryBlobs: [String]
        do {
            let training = try TrainingGraph(graph: graph)
            let prefixNames = Set(training.prefix.map(\.name)), tailNames = Set(training.tail.map(\.name))
            layers = graph.layers.filter { prefixNames.contains($0.name) || tailNames.contains($0.name) }
            inPrefix = layers.map { prefixNames.contains($0.name) }
            runsBackward = layers.map { training.backwardLayers.contains($0.name) }
            let skipped = training.fusedForwardNames
            fused = layers.map { skipped.contains($0.name) }
            wantsGradient = { training.gradientBlobs.contains($0) }
            boundaryBlobs = training.boundary
            loss = training.loss
            forwardOnlyReason = nil
        } catch {
            layers = graph.layers
            inPrefix = layers.map { _ in true }
            runsBackward = layers.map { _ in false }
            fused = layers.map { _ in false }
            wantsGradient = { _ in false }
            boundaryBlobs = []
            loss = nil
            forwardOnlyReason = (error as? UpdraftError)?.message ?? "\(error)"
        }
        self.layers = layers
        self.inPrefix = inPrefix
        self.runsBackward = runsBackward
        self.fusedIntoConvolution = fused

        // Kernels per layer, plus one accumulate for every extra gradient a blob receives.
        var gradientContributions: [String: Int] = [:]
        for (i, l) in layers.enumerated() where runsBackward[i] {
            for blob in Set(l.inputs) where wantsGradient(blob) { gradientContributions[blob, default: 0] += 1 }
        }
        var work: [LayerWork] = []
        for (i, l) in layers.enumerated() {
            var w = try CostModel.work(for: l, batch: batch, optimizer: optimizer,
                                       backwardData: runsBackward[i] && l.inputs.contains(where: wantsGradient),
                                       backwardWeights: runsBackward[i] && l.isUpdatable)
            if fused[i] { w.forward = [] }
            if let extra = gradientContributions[l.output], extra > 1 {
                let n = l.outputShape.withBatch(batch).count
                w.backwardData += Array(repeating: KernelWork(OpCost(flops: Double(n), bytes: f32Bytes(n, n, n))),
                                        count: extra - 1)
            }
            work.append(w)
        }
        self.work = work

        inputBytes = graph.input.shape.withBatch(batch).count * 4
        if let loss {
            switch loss.targetEncoding {
            case .classLabel, .classIndex: targetBytes = batch * 4
            case .values: targetBytes = loss.inputShape.withBatch(batch).count * 4
            }
        } else {
            targetBytes = 0
        }
        outputBytes = (layers.last?.outputShape.withBatch(batch).count ?? 0) * 4
        let shapes = graph.blobShapes
        boundary = boundaryBlobs.map { ($0, (shapes[$0]?.withBatch(batch).count ?? 0) * 4) }

        // Memory: activations (and their gradients when a layer runs backward), parameters (with a
        // gradient and the optimizer's state when trained), the input in the part that receives it.
        let stateCopies = UInt64(optimizer.optimizerType.stateSlots.count)
        var prefixMemory: UInt64 = 0, tailMemory: UInt64 = 0
        for (i, l) in layers.enumerated() {
            let activation = UInt64(l.outputShape.withBatch(batch).count) * (halfPrecisionPrefix && inPrefix[i] ? 2 : 4)
            var bytes = activation * (runsBackward[i] ? 2 : 1)
            let parameters = UInt64(l.parameterCount) * 4
            bytes += parameters * (runsBackward[i] && l.isUpdatable ? 2 + stateCopies : 1)
            if inPrefix[i] { prefixMemory += bytes } else { tailMemory += bytes }
        }
        if inPrefix.contains(true) { prefixMemory += UInt64(inputBytes) } else { tailMemory += UInt64(inputBytes) }
        // The boundary blobs' fp32 copies, made where the prefix ran.
        if halfPrecisionPrefix { prefixMemory += boundary.reduce(0) { $0 + UInt64($1.bytes) } }
        tailMemory += UInt64(targetBytes)
        self.prefixMemory = prefixMemory
        self.tailMemory = tailMemory
    }
}

extension GraphAnalysis {
    /// The programs a device running the layers of `segments` makes (an estimate for the set-up
    /// cost): one per op family a layer runs forward, one more per family that runs backward, the
    /// loss and the optimizer's step with the tail of a training graph, and the input's staging.
    func programCount(_ segments: Set<ExecutionPlan.Segment>) -> Int {
        var forward = Set<String>(), backward = Set<String>()
        for (i, layer) in layers.enumerated() where segments.contains(inPrefix[i] ? .prefix : .tail) {
            if !fusedIntoConvolution[i] { forward.insert(layer.op.name) }
            if runsBackward[i] { backward.insert(layer.op.name) }
        }
        let training = loss != nil && segments.contains(.tail) ? 2 : 0
        return forward.count + backward.count + training + 1
    }
}
