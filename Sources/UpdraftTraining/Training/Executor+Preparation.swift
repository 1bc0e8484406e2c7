import UpdraftCore
import UpdraftBackends
import UpdraftModel
import UpdraftLayers

/// Preparation before the first step: every layer's kind makes on its backend the per-shape objects
/// its passes will use for a batch size (`LayerKind.prepare`, e.g. the oneDNN primitives the CPU
/// backend JIT-compiles on first use), so that they are not made inside the first epoch. The layers
/// are handed over as `forward` (Executor+Passes.swift) and `backward` will run them: fused
/// activations and residual adds skipped, the function fused into the layer before as its epilogue, a convolution that
/// writes its concat's slice writing into the concat's output, the tail's gradient passes where they run,
/// the prefix's chunked start at its chunks' sizes.
extension Executor {
    /// Makes ready the training step's layers for batches of `batch` examples; returns how many
    /// objects the backends made (0 when everything was made already, or nothing is made ahead).
    @discardableResult
    public func prepare(batch: Int) throws -> Int {
        guard batch > 0 else { return 0 }
        let halfBlobs = training.halfStoredBlobs
        // The prefix's chunked start runs at its chunks' sizes (Executor+Chunking.swift).
        let plan = chunksPrefix ? training.prefixChunking(layers: training.prefix, batch: batch,
                                                          cacheBytes: prefixChunkingLimits.cacheBytes,
                                                          largeBlobBytes: prefixChunkingLimits.largeBlobBytes) : nil
        let chunked = Set(training.prefix.prefix(plan?.layerCount ?? 0).map(\.name))
        let chunkSizes = plan.map { batch % $0.images == 0 ? [$0.images] : [$0.images, batch % $0.images] } ?? []
        var made = 0
        for (layers, trained) in [(training.prefix, false), (training.tail, true)] {
            for layer in layers where !training.fusedForwardNames.contains(layer.name) {
                let backend = self.backend(for: layer)
                let slicing = backend.writesConvolutionSlices
                if slicing && training.slicedConcats.contains(layer.name) { continue }
                // A convolution with a fused residual (`fusedResiduals`) takes no activation of its own here: oneDNN
                // runs it bare and the add and function follow (CPUBackend.convolutionForward), so its key has none.
                let fusedWith = training.fusedActivations[layer.name]
                let epilogue: Activation? = { if case let .activation(a)? = fusedWith?.op { return a } else { return nil } }()
                // A slice of a concat kept in halves is computed whole and copied in (Executor+HalfStorage.swift).
                var outputChannels: Int? = nil
                if slicing, let slice = training.concatSlices[layer.name], !halfBlobs.contains(slice.concat.output) {
                    outputChannels = slice.channels
                }
                var passes: PreparedPasses = .forward
                if trained {
                    if layer.inputs.contains(where: { training.gradientBlobs.contains($0) }) { passes.insert(.backwardData) }
                    if parameterGradients(layer) != nil { passes.insert(.backwardWeights) }
                }
                for n in chunked.contains(layer.name) ? chunkSizes : [batch] {
                    made += try layer.op.kind.prepare(PrepareCall(layer: layer, batch: n, backend: backend, passes: passes,
                                                                  epilogue: epilogue, outputChannels: outputChannels))
                }
            }
        }
        return made
    }
}
