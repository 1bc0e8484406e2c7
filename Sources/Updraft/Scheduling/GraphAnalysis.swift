/// What the scheduler needs to know about a graph at one batch size, independent of devices: where
/// the frozen prefix ends, which layers run backward, each layer's kernels, the tensors that cross
/// between memories, and the memory each part needs.
struct GraphAnalysis {
    let graph: NetworkGraph
    let batch: Int
    /// Layers `0..<prefixCount` (execution order) come before the first updatable layer: forward only.
    let prefixCount: Int
    /// Per layer: it computes gradients (its input's, its parameters', or both).
    let runsBackward: [Bool]
    let work: [LayerWork]
    /// Indices of the layers that read the network input.
    let inputReaders: [Int]
    let inputBytes: Int
    let targetBytes: Int
    let outputBytes: Int
    /// Blobs produced in the prefix and read in the tail, with their size per batch.
    let boundary: [(blob: String, bytes: Int)]
    /// The tail's own copy of the boundary blobs when it runs on another device.
    var boundaryBytes: UInt64 { boundary.reduce(0) { $0 + UInt64($1.bytes) } }
    let prefixMemory: UInt64
    let tailMemory: UInt64
    /// Stands for host memory in transfers (where batches arrive and losses are read).
    let hostMemory = DeviceProfile(name: "host memory", kind: .cpu, openCLIndex: nil, fmaGFLOPS: 1, bandwidthGBps: 1,
                                   launchLatencyMicroseconds: 0, memoryBytes: 0, transferGBps: 1)

    init(graph: NetworkGraph, batch: Int) throws {
        self.graph = graph
        self.batch = batch
        let layers = graph.layers
        let optimizer = graph.updateParameters?.optimizer?.kind ?? .sgd
        let prefixCount = layers.firstIndex(where: \.isUpdatable) ?? layers.count
        self.prefixCount = prefixCount

        var producer: [String: Int] = [:]
        for (i, l) in layers.enumerated() { producer[l.output] = i }
        var consumers: [String: [Int]] = [:]
        for (i, l) in layers.enumerated() { for blob in Set(l.inputs) { consumers[blob, default: []].append(i) } }

        // Downstream of (or itself) an updatable layer: only these can need gradients.
        var trainable = [Bool](repeating: false, count: layers.count)
        for (i, l) in layers.enumerated() {
            trainable[i] = l.isUpdatable || l.inputs.contains { producer[$0].map { trainable[$0] } ?? false }
        }
        // Where gradients enter: the logits for the fused softmax + cross-entropy, else the loss input.
        var gradientSources: Set<String> = []
        if let loss = graph.loss {
            if loss.softmaxLayer != nil, let logits = loss.logits { gradientSources.insert(logits) }
            else { gradientSources.insert(loss.input) }
        }
        // Walk back from the loss: a layer runs backward when it is trainable and its output's
        // gradient is needed (by the loss, or by a consumer that computes its input gradient).
        var runsBackward = [Bool](repeating: false, count: layers.count)
        var backwardData = [Bool](repeating: false, count: layers.count)
        var work = [LayerWork](repeating: LayerWork(), count: layers.count)
        for i in layers.indices.reversed() {
            let l = layers[i]
            let readers = consumers[l.output] ?? []
            let gradientReaders = readers.filter { backwardData[$0] }.count
            let outputNeedsGradient = gradientSources.contains(l.output) || gradientReaders > 0
            runsBackward[i] = trainable[i] && outputNeedsGradient
            backwardData[i] = runsBackward[i] && l.inputs.contains { producer[$0].map { trainable[$0] } ?? false }
            work[i] = try CostModel.work(for: l, batch: batch, optimizer: optimizer,
                                         backwardData: backwardData[i], backwardWeights: runsBackward[i] && l.isUpdatable)
            // Gradients from several readers are summed (Backend.accumulate) before this layer's backward.
            if runsBackward[i], gradientReaders > 1 {
                let n = l.outputShape.withBatch(batch).count
                work[i].backwardData += Array(repeating: KernelWork(OpCost(flops: Double(n), bytes: f32Bytes(n, n, n))),
                                              count: gradientReaders - 1)
            }
        }
        self.runsBackward = runsBackward
        self.work = work

        let input = graph.input
        let inputReaders = layers.indices.filter { layers[$0].inputs.contains(input.name) }
        self.inputReaders = inputReaders
        inputBytes = input.shape.withBatch(batch).count * 4
        if let loss = graph.loss {
            switch loss.targetEncoding {
            case .classLabel, .classIndex: targetBytes = batch * 4
            case .values: targetBytes = loss.inputShape.withBatch(batch).count * 4
            }
        } else {
            targetBytes = 0
        }
        outputBytes = (layers.last?.outputShape.withBatch(batch).count ?? 0) * 4

        var boundary: [(String, Int)] = []
        for i in 0..<prefixCount {
            let blob = layers[i].output
            if (consumers[blob] ?? []).contains(where: { $0 >= prefixCount }) {
                boundary.append((blob, layers[i].outputShape.withBatch(batch).count * 4))
            }
        }
        self.boundary = boundary

        // Memory: activations (and their gradients when a layer runs backward), parameters (with a
        // gradient and the optimizer's state when trained).
        let stateCopies: UInt64 = optimizer == .adam ? 2 : 1
        var prefixMemory: UInt64 = 0, tailMemory: UInt64 = 0
        for (i, l) in layers.enumerated() {
            let isAlias: Bool = { if case .flatten = l.op { return true }; return false }()
            let activation = isAlias ? 0 : UInt64(l.outputShape.withBatch(batch).count) * 4
            var bytes = activation * (runsBackward[i] ? 2 : 1)
            let parameters = UInt64(l.parameterCount) * 4
            bytes += parameters * (runsBackward[i] && l.isUpdatable ? 2 + stateCopies : 1)
            if i < prefixCount { prefixMemory += bytes } else { tailMemory += bytes }
        }
        let inputInPrefix = inputReaders.contains { $0 < prefixCount }
        let inputInTail = inputReaders.contains { $0 >= prefixCount }
        if inputInPrefix { prefixMemory += UInt64(inputBytes) }
        if inputInTail { tailMemory += UInt64(inputBytes) }
        tailMemory += UInt64(targetBytes)
        self.prefixMemory = prefixMemory
        self.tailMemory = tailMemory
    }
}
