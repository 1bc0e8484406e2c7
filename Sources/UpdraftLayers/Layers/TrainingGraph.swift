import UpdraftCore
import UpdraftModel

/// What training needs to know about a graph beyond its shapes: which layers are frozen (forward
/// only), which need backward, which blobs carry gradients, which conv → ReLU pairs fuse, and where
/// the frozen prefix hands over to the trainable tail (the blobs a feature cache keeps).
public struct TrainingGraph: Sendable {
    /// The model's network (layers, shapes, loss) the analysis is of.
    public let graph: NetworkGraph
    /// The loss; nil for a graph made only to run forward (`inference(graph:)`).
    public let loss: GraphLoss?
    /// Layers whose output depends on an updatable parameter, in topological order.
    public let tail: [GraphLayer]
    /// Layers whose output depends on no updatable parameter and that training needs, in order.
    public let prefix: [GraphLayer]
    /// Tail layers that run backward (they lie between an updatable layer and the loss).
    public let backwardLayers: Set<String>
    /// Blobs that receive a gradient.
    public let gradientBlobs: Set<String>
    /// Blobs the prefix (or the network input) hands to the tail: what a feature cache stores.
    public let boundary: [String]
    /// Convolutions and inner products whose only consumer is an element-wise function (activation,
    /// clip, unary): the convolution writes the function's output with a fused epilogue and the
    /// function's layer is skipped forward. When that layer runs backward its derivative must come
    /// from y (`Activation.backwardReadsOutput`), since the pre-activation is not kept; otherwise the
    /// pair is not fused. Maps convolution / inner-product name -> activation layer.
    public let fusedActivations: [String: GraphLayer]
    /// Frozen convolutions whose output only feeds a plain two-input `add` of equal shapes (and, when
    /// the sum feeds only an element-wise function, that function): the convolution adds the other
    /// input (`FusedResidual.residual`, computed by a layer before it) and applies the function in its
    /// epilogue, writing `FusedResidual.output`; the add and the function are skipped forward. Only
    /// forward-only layers (the prefix, or an `inference` graph) fuse, never with half-stored
    /// activations (`halfPrecisionPrefix` keeps them unfused). Maps convolution name -> the fusion.
    public var fusedResiduals: [String: FusedResidual] { halfPrecisionPrefix ? [:] : residualCandidates }
    private let residualCandidates: [String: FusedResidual]
    /// A residual addition (and the function after it) fused into the convolution that produces one of its inputs.
    public struct FusedResidual: Sendable {
        /// The `add` layer the convolution's epilogue runs.
        public var add: GraphLayer
        /// The add's other input: the blob the convolution's epilogue adds.
        public var residual: String
        /// The element-wise function after the add, fused too; nil when the sum has another reader.
        public var activation: GraphLayer?
        /// The blob the convolution finally writes.
        public var output: String { activation?.output ?? add.output }
        /// The activation the epilogue applies after the add.
        public var epilogue: Activation? { if case let .activation(a)? = activation?.op { return a } else { return nil } }
    }
    /// The adds and functions skipped forward because a convolution's epilogue runs them.
    public var fusedResidualNames: Set<String> {
        Set(fusedResiduals.values.flatMap { [$0.add.name] + ($0.activation.map { [$0.name] } ?? []) })
    }
    /// Every layer fusion skips forward: `fusedActivationNames` and `fusedResidualNames`.
    public var fusedForwardNames: Set<String> { fusedActivationNames.union(fusedResidualNames) }
    /// The fused pairs whose function is a ReLU.
    public var fusedReLU: [String: GraphLayer] {
        fusedActivations.filter { if case .activation(.relu) = $0.value.op { return true } else { return false } }
    }
    /// The blob training forward must reach: the logits for fused softmax + CE, else the loss input.
    public let lossBlob: String?
    /// Frozen convolutions that write their slice of a channel concat's output (on backends that can,
    /// `Backend.writesConvolutionSlices`), by convolution name; the concat itself is then skipped.
    /// A concat qualifies when it is in the frozen prefix and each of its inputs is the (fused)
    /// output of a distinct prefix convolution that nothing else reads.
    public let concatSlices: [String: ConcatSlice]
    /// Whether the frozen prefix keeps its activations as IEEE halves (fp32 arithmetic, each stored
    /// value rounded to nearest even; `UpdateConfiguration.frozenActivationsHalfPrecision`): every
    /// blob in `halfStoredBlobs`. The tail, the feature cache and every reader outside the prefix
    /// get them as floats (converted once, so the boundary blobs carry the half rounding).
    public var halfPrecisionPrefix = false
    /// The blobs prefix layers write: what `halfPrecisionPrefix` stores as halves (the network input stays fp32).
    public var halfStoredBlobs: Set<String> { halfPrecisionPrefix ? Set(prefix.map(\.output)) : [] }
    /// The concats whose inputs write straight into them.
    public var slicedConcats: Set<String> { Set(concatSlices.values.map(\.concat.name)) }

    /// Where one convolution writes in a concat's output: channels [offset, offset + its channels) of `channels`.
    public struct ConcatSlice: Sendable {
        /// The channel concat whose output the convolution writes into.
        public var concat: GraphLayer
        /// The first output channel the convolution writes.
        public var offset: Int
        /// The concat output's total channel count.
        public var channels: Int
    }

    /// A graph that only runs forward (prediction, evaluation of models without a loss): every layer
    /// is in the prefix, nothing is trained. Activations fuse into the convolution or inner product
    /// before them and convolutions write their concat slices, as in a training prefix, except where
    /// the blob skipped is one a caller reads: the loss blobs, the predicted probabilities and the
    /// blobs no layer reads (the network's outputs). A prediction of a blob that fusion skips runs
    /// unfused (`fusionSkips`).
    public static func inference(graph: NetworkGraph) -> TrainingGraph { TrainingGraph(inferenceOnly: graph) }

    private init(inferenceOnly graph: NetworkGraph) {
        self.graph = graph
        loss = graph.loss
        let lossBlob = graph.loss.map { $0.kind == .categoricalCrossEntropy && $0.logits != nil ? $0.logits! : $0.input }
        self.lossBlob = lossBlob
        tail = []
        prefix = graph.layers
        backwardLayers = []
        gradientBlobs = []
        boundary = []
        var protected = Set([lossBlob, graph.loss?.input, graph.predictedProbabilitiesName].compactMap { $0 })
        for l in graph.layers where graph.consumers(of: l.output).isEmpty { protected.insert(l.output) }
        let fused = Self.fusedActivations(graph: graph, layers: graph.layers, needed: Set(graph.layers.map(\.name)),
                                          protected: protected, backward: [])
        fusedActivations = fused
        concatSlices = Self.concatSlices(graph: graph, prefix: graph.layers, fused: fused)
        residualCandidates = Self.fusedResiduals(graph: graph, layers: graph.layers, protected: protected, fused: fused)
    }

    /// Whether the fused forward skips `blob`: the output of a convolution or inner product whose
    /// activation is fused (only the activation's output is written), or what a convolution that
    /// writes its slice of a concat's output would otherwise write (its own or its activation's output).
    public func fusionSkips(_ blob: String) -> Bool {
        guard let producer = graph.producer(of: blob) else { return false }
        if fusedActivations[producer.name] != nil || concatSlices[producer.name] != nil { return true }
        if fusedResiduals[producer.name] != nil || fusedResiduals.values.contains(where: { $0.activation != nil && $0.add.name == producer.name }) {
            return true
        }
        return fusedActivations.contains { $0.value.name == producer.name && concatSlices[$0.key] != nil }
    }

    /// Analyses `graph` for training. Throws when it has no usable loss (`NetworkGraph.requireLoss()`), `.invalidModel` when it has no updatable layer.
    public init(graph: NetworkGraph) throws {
        self.graph = graph
        let loss = try graph.requireLoss()
        self.loss = loss
        guard !graph.updatableLayers.isEmpty else {
            throw UpdraftError(.invalidModel, "the model has no updatable layer",
                               hint: "mark convolution or inner-product layers updatable (coremltools: make_updatable)")
        }
        let fusedLoss = loss.kind == .categoricalCrossEntropy && loss.logits != nil
        let lossBlob = fusedLoss ? loss.logits! : loss.input
        self.lossBlob = lossBlob

        // Layers needed to reach the loss blob.
        var needed: Set<String> = []
        var stack = [lossBlob]
        while let blob = stack.popLast() {
            guard let p = graph.producer(of: blob), !needed.contains(p.name) else { continue }
            needed.insert(p.name)
            stack.append(contentsOf: p.inputs)
        }
        let trainingLayers = graph.layers.filter { needed.contains($0.name) }
        guard trainingLayers.contains(where: \.isUpdatable) else {
            throw UpdraftError(.invalidModel, "no updatable layer lies on the path to the loss input '\(loss.input)'",
                               hint: "the updatable layers must feed the loss")
        }

        // Blobs that depend on updatable parameters.
        var dependent: Set<String> = []
        for l in trainingLayers where l.isUpdatable || l.inputs.contains(where: dependent.contains) {
            dependent.insert(l.output)
        }
        tail = trainingLayers.filter { dependent.contains($0.output) }
        if let l = tail.first(where: { !$0.op.hasGradient }) {
            throw UpdraftError(.unsupported,
                               "layer '\(l.name)' (\(l.op.name)) lies between an updatable layer and the loss but has no gradient",
                               hint: "an index (argMax, argMin) cannot be trained through: make only layers after it updatable, or take the loss before it")
        }
        prefix = trainingLayers.filter { !dependent.contains($0.output) }

        // Backward runs for every tail layer (each lies on the path to the loss by construction);
        // gradients flow into dependent blobs only.
        backwardLayers = Set(tail.map(\.name))
        gradientBlobs = dependent

        var boundary: [String] = [], inBoundary: Set<String> = []
        for l in tail { for b in l.inputs where !dependent.contains(b) && inBoundary.insert(b).inserted { boundary.append(b) } }
        self.boundary = boundary

        let fused = Self.fusedActivations(graph: graph, layers: trainingLayers, needed: needed,
                                          protected: [lossBlob, loss.input], backward: backwardLayers)
        fusedActivations = fused
        concatSlices = Self.concatSlices(graph: graph, prefix: prefix, fused: fused)
        residualCandidates = Self.fusedResiduals(graph: graph, layers: prefix,
                                                 protected: Set([lossBlob, loss.input] + boundary), fused: fused)
    }

    /// conv -> add(conv, other) [-> function] fusion among forward-only `layers`: the convolution's output
    /// has the add as its only reader and is not `protected`; the add is `.add` of two distinct inputs
    /// whose shapes equal its output's; `other` is the network input or is written by a layer before the
    /// convolution (so it exists when the convolution runs) and is not the convolution's own
    /// (fused-activation or sliced) output. The function after the add fuses when it is the sum's only
    /// reader and the sum is not `protected`. Where both inputs qualify, the later convolution fuses.
    private static func fusedResiduals(graph: NetworkGraph, layers: [GraphLayer], protected: Set<String>,
                                       fused: [String: GraphLayer]) -> [String: FusedResidual] {
        var index: [String: Int] = [:]
        for (i, l) in layers.enumerated() { index[l.name] = i }
        var result: [String: FusedResidual] = [:]
        for add in layers {
            guard case .add = add.op, add.inputs.count == 2, add.inputs[0] != add.inputs[1],
                  add.inputShapes.count == 2, add.inputShapes.allSatisfy({ $0 == add.outputShape }) else { continue }
            var chosen: (conv: GraphLayer, other: String)? = nil
            for (k, blob) in add.inputs.enumerated() {
                let other = add.inputs[1 - k]
                guard let conv = graph.producer(of: blob), case .convolution = conv.op, let ci = index[conv.name],
                      fused[conv.name] == nil, !protected.contains(blob), graph.consumers(of: blob).count == 1,
                      conv.outputShape == add.outputShape else { continue }
                if let p = graph.producer(of: other) {
                    guard let oi = index[p.name], oi < ci else { continue }
                } else if other != graph.input.name { continue }
                if let c = chosen, index[c.conv.name]! > ci { continue }
                chosen = (conv, other)
            }
            guard let (conv, other) = chosen, result[conv.name] == nil else { continue }
            var activation: GraphLayer? = nil
            let readers = graph.consumers(of: add.output)
            if !protected.contains(add.output), readers.count == 1, index[readers[0].name] != nil,
               case .activation = readers[0].op, readers[0].inputs == [add.output] {
                activation = readers[0]
            }
            result[conv.name] = FusedResidual(add: add, residual: other, activation: activation)
        }
        return result
    }

    /// conv / inner product -> element-wise function fusion, when the product's output feeds only that
    /// function, is not a loss blob, and the function's backward (if it runs) reads only y.
    private static func fusedActivations(graph: NetworkGraph, layers: [GraphLayer], needed: Set<String>,
                                         protected: Set<String>, backward: Set<String>) -> [String: GraphLayer] {
        var fused: [String: GraphLayer] = [:]
        for l in layers {
            guard l.op.kind.acceptsEpilogue else { continue }
            guard !protected.contains(l.output) else { continue }
            let consumers = graph.consumers(of: l.output).filter { needed.contains($0.name) }
            guard consumers.count == 1, graph.consumers(of: l.output).count == 1,
                  case let .activation(a) = consumers[0].op, consumers[0].inputs == [l.output],
                  !backward.contains(consumers[0].name) || a.backwardReadsOutput else { continue }
            fused[l.name] = consumers[0]
        }
        return fused
    }

    private static func concatSlices(graph: NetworkGraph, prefix: [GraphLayer], fused: [String: GraphLayer]) -> [String: ConcatSlice] {
        // Prefix convolutions by the blob they finally write (the fused ReLU's output when fused).
        var writer: [String: GraphLayer] = [:]
        for l in prefix {
            guard case .convolution = l.op else { continue }
            writer[fused[l.name]?.output ?? l.output] = l
        }
        var slices: [String: ConcatSlice] = [:]
        for concat in prefix {
            guard case .concat = concat.op, concat.inputs.count > 1, Set(concat.inputs).count == concat.inputs.count,
                  concat.inputShapes.count == concat.inputs.count else { continue }
            let channels = concat.outputShape.c
            let convs = concat.inputs.compactMap { writer[$0] }
            guard convs.count == concat.inputs.count, Set(convs.map(\.name)).count == convs.count,
                  concat.inputs.allSatisfy({ graph.consumers(of: $0).count == 1 }),
                  zip(convs, concat.inputShapes).allSatisfy({ $0.outputShape == $1 }),
                  concat.inputShapes.allSatisfy({ $0.h == concat.outputShape.h && $0.w == concat.outputShape.w }),
                  concat.inputShapes.reduce(0, { $0 + $1.c }) == channels else { continue }
            var offset = 0
            for (conv, shape) in zip(convs, concat.inputShapes) {
                slices[conv.name] = ConcatSlice(concat: concat, offset: offset, channels: channels)
                offset += shape.c
            }
        }
        return slices
    }

    /// The activation layers skipped forward because their convolution or inner product applies them.
    public var fusedActivationNames: Set<String> { Set(fusedActivations.values.map(\.name)) }

    /// Work of one training step, split the way the executor runs it.
    public struct StepCost: Sendable {
        /// The frozen prefix forward (fused ReLUs cost nothing of their own).
        public var prefixForward = OpCost.zero
        /// The trainable tail forward, fused activations included.
        public var tailForward = OpCost.zero
        /// Input gradients of tail layers whose inputs carry one.
        public var tailBackwardData = OpCost.zero
        /// Weight (and bias) gradients of the updatable layers.
        public var weightGradients = OpCost.zero
        /// A step through the whole network.
        public var fullStep: OpCost { prefixForward + cachedStep }
        /// A step on cached boundary features: the tail only.
        public var cachedStep: OpCost { tailForward + tailBackwardData + weightGradients }
    }

    /// Work of one training step at `batch`: the scheduler's cost model (`CostModel.work`, which
    /// walks the op descriptions in Ops/) over what the executor computes: no input gradient for the
    /// first updatable layer, no pass of its own for an activation fused into the layer before it.
    /// Optimizer steps are not counted (the bench reports gradient GFLOP/s).
    public func stepCost(batch: Int) throws -> StepCost {
        var c = StepCost()
        let optimizer = graph.updateParameters?.optimizer?.kind ?? .sgd
        let skipped = fusedForwardNames
        for l in prefix where !skipped.contains(l.name) {
            let w = try l.op.kind.work(l, batch: batch, optimizer: optimizer, backwardData: false, backwardWeights: false)
            c.prefixForward = c.prefixForward + LayerWork.total(w.forward)
        }
        for l in tail {
            let w = try l.op.kind.work(l, batch: batch, optimizer: optimizer,
                                       backwardData: l.inputs.contains(where: gradientBlobs.contains),
                                       backwardWeights: l.isUpdatable)
            if !skipped.contains(l.name) { c.tailForward = c.tailForward + LayerWork.total(w.forward) }
            c.tailBackwardData = c.tailBackwardData + LayerWork.total(w.backwardData)
            c.weightGradients = c.weightGradients + LayerWork.total(w.backwardWeights)
        }
        return c
    }
}

/// FLOPs and bytes of a graph layer: the scheduler's cost model (`CostModel.work`) summed.
public enum LayerCost {
    /// The layer's forward kernels.
    public static func forward(_ l: GraphLayer, batch: Int) throws -> OpCost {
        LayerWork.total(try l.op.kind.work(l, batch: batch, optimizer: .sgd, backwardData: false, backwardWeights: false).forward)
    }

    /// The layer's input and parameter gradients (not the optimizer step).
    public static func backward(_ l: GraphLayer, batch: Int) throws -> OpCost {
        let w = try l.op.kind.work(l, batch: batch, optimizer: .sgd, backwardData: true, backwardWeights: l.parameterCount > 0)
        return LayerWork.total(w.backwardData + w.backwardWeights)
    }
}
