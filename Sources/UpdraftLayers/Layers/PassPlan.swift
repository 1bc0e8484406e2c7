import UpdraftCore
import UpdraftBackends
import UpdraftModel

/// What one training step runs, layer by layer, at one batch size: which passes of each layer run,
/// at which batch sizes its forward pass runs (the prefix's chunked start: `PrefixChunking`), the
/// function fused into it as an epilogue, the concat slice it writes and the residual it adds. Built
/// once from a `TrainingGraph`, and the one place that says which passes run: the executor's
/// preparation, forward and backward passes, the CPU convolution and op tuners and the OpenCL kernel
/// tuner read it.
///
/// The rule: a prefix layer runs forward only; a tail layer runs backward, with an input gradient when
/// one of its inputs carries a gradient (`TrainingGraph.gradientBlobs`) and a weight gradient when it
/// is updatable; a function fused into the layer before it (or a residual add fused into a
/// convolution) runs no forward pass of its own.
public struct PassPlan: Sendable {
    /// One layer of the step.
    public struct Entry: Sendable {
        /// The layer.
        public let layer: GraphLayer
        /// In the frozen prefix (forward only) rather than the trained tail.
        public let frozen: Bool
        /// The passes that run (empty for a prefix layer fused into the one before it).
        public let passes: PreparedPasses
        /// The batch sizes the forward pass runs at: the chunks' sizes in the prefix's chunked start
        /// (`images`, and the last chunk's when it is smaller), else the step's batch.
        public let forwardBatches: [Int]
        /// The element-wise function the forward pass applies as its epilogue (`fusedActivations`).
        public let epilogue: Activation?
        /// The concat output slice the layer writes, on backends that write slices (`concatSlices`).
        public let concatSlice: TrainingGraph.ConcatSlice?
        /// The residual add (and function) the convolution's epilogue runs (`fusedResiduals`).
        public let residual: TrainingGraph.FusedResidual?
        /// The blob the forward pass writes: the fused residual's or function's output, else the layer's.
        public let output: String
        /// Per input: whether its gradient is computed.
        public let inputGradients: [Bool]
    }

    /// The step's batch size.
    public let batch: Int
    /// How the prefix's start runs chunked; nil when it runs whole.
    public let chunking: PrefixChunking?
    /// The prefix's layers, then the tail's, in execution order.
    public let entries: [Entry]

    /// The plan of a step of `batch` on `training`; the prefix's start chunked as `chunking` says.
    public init(training: TrainingGraph, batch: Int, chunking: PrefixChunking?) {
        self.batch = batch
        self.chunking = chunking
        let chunked = Set(training.prefix.prefix(chunking?.layerCount ?? 0).map(\.name))
        let chunkSizes = chunking.map { batch % $0.images == 0 ? [$0.images] : [$0.images, batch % $0.images] } ?? [batch]
        let skipped = training.fusedForwardNames
        var entries: [Entry] = []
        for (layers, frozen) in [(training.prefix, true), (training.tail, false)] {
            for layer in layers {
                let inputGradients = layer.inputs.map { !frozen && training.gradientBlobs.contains($0) }
                var passes: PreparedPasses = skipped.contains(layer.name) ? [] : .forward
                if inputGradients.contains(true) { passes.insert(.backwardData) }
                if !frozen && layer.isUpdatable { passes.insert(.backwardWeights) }
                let fused = training.fusedActivations[layer.name], residual = training.fusedResiduals[layer.name]
                let epilogue: Activation? = {
                    if case let .activation(a)? = fused?.op { return a } else { return nil }
                }()
                entries.append(Entry(layer: layer, frozen: frozen, passes: passes,
                                     forwardBatches: chunked.contains(layer.name) ? chunkSizes : [batch], epilogue: epilogue,
                                     concatSlice: training.concatSlices[layer.name], residual: residual,
                                     output: residual?.output ?? fused?.output ?? layer.output, inputGradients: inputGradients))
            }
        }
        self.entries = entries
    }

    /// The plan the tuners measure: `graph` trained (forward only when it cannot be: no loss or no
    /// updatable layer), its prefix chunked as a CPU step with a cache budget of `cacheBytes` runs it.
    public static func forTuning(_ graph: NetworkGraph, batch: Int, cacheBytes: Int = PrefixChunking.cacheBudgetBytes) -> PassPlan {
        let training = (try? TrainingGraph(graph: graph)) ?? TrainingGraph.inference(graph: graph)
        return PassPlan(training: training, batch: batch,
                        chunking: training.prefixChunking(layers: training.prefix, batch: batch, cacheBytes: cacheBytes))
    }

    /// The entry of the layer named `name`.
    public func entry(_ name: String) -> Entry? { entries.first { $0.layer.name == name } }
}
