import UpdraftCore
import UpdraftBackends
import UpdraftModel
import UpdraftLayers
import UpdraftData

/// Preparation before the first step: every layer's kind makes on its backend the per-shape objects
/// its passes will use for a batch size (`LayerKind.prepare`: the oneDNN primitives the CPU backend
/// JIT-compiles on first use, the programs OpenCL builds on first launch), so that they are not made
/// inside the first epoch. The layers are handed over as `forward` (Executor+Passes.swift) and
/// `backward` will run them: fused activations and residual adds without a forward pass (a fused
/// function in the trained tail still runs backward), the function fused into the layer before as its
/// epilogue, a convolution that writes its concat's slice writing into the concat's output, the
/// tail's gradient passes where they run, the prefix's chunked start at its chunks' sizes; then the
/// image upload, the loss and the optimizer step. What the backends were asked for and did not make
/// at once (OpenCL's programs) is made last, together (`Backend.finishPreparation`).
extension Executor {
    /// Makes ready the training step's layers for batches of `batch` examples; returns how many
    /// objects the backends made (0 when everything was made already, or nothing is made ahead).
    /// - Parameter pixels: whether batches come as 8-bit images scaled on the device (nil: when the
    ///   network's input is an image; a prediction from a preprocessed tensor passes false).
    @discardableResult
    public func prepare(batch: Int, pixels: Bool? = nil) throws -> Int {
        guard batch > 0 else { return 0 }
        let halfBlobs = training.halfStoredBlobs
        // The prefix's chunked start runs at its chunks' sizes (Executor+Chunking.swift).
        var made = 0
        for entry in stepPlan(batch: batch).entries where !entry.passes.isEmpty {
            let layer = entry.layer
            let backend = self.backend(for: layer)
            let slicing = backend.writesConvolutionSlices
            if slicing && training.slicedConcats.contains(layer.name) { continue }
            // A slice of a concat kept in halves is computed whole and copied in (Executor+HalfStorage.swift).
            var outputChannels: Int? = nil
            if slicing, let slice = entry.concatSlice, !halfBlobs.contains(slice.concat.output) { outputChannels = slice.channels }
            // A convolution with a fused residual takes no activation of its own here (`entry.epilogue` is nil): oneDNN
            // runs it bare and the add and function follow (CPUBackend.convolutionForward), so its key has none.
            for n in entry.forwardBatches {
                made += try layer.op.kind.prepare(PrepareCall(layer: layer, batch: n, backend: backend, passes: entry.passes,
                                                              epilogue: entry.epilogue, outputChannels: outputChannels,
                                                              residual: entry.residual != nil))
            }
        }
        // What every step runs besides the layers: an image batch's upload, the loss, the optimizer's step.
        let imageInput: Bool = { if case .image = graph.input.feature.type { return true } else { return false } }()
        if pixels ?? imageInput {
            made += try (training.prefix.isEmpty ? tailBackend : prefixBackend).prepareKernels([.pixels])
        }
        if training.loss != nil { made += try tailBackend.prepareKernels([.softmax]) }
        if !training.tail.isEmpty { made += try tailBackend.prepareKernels([.optimizers]) }
        // Then what those calls asked for and did not make at once (OpenCL: the programs, built together).
        made += try prefixBackend.finishPreparation()
        if tailBackend !== prefixBackend { made += try tailBackend.finishPreparation() }
        return made
    }

    /// The plan of a step of `batch` on this executor (`PassPlan`): its prefix chunked where this
    /// executor chunks it.
    func stepPlan(batch: Int) -> PassPlan {
        let chunking = chunksPrefix ? training.prefixChunking(layers: training.prefix, batch: batch,
                                                              cacheBytes: prefixChunkingLimits.cacheBytes,
                                                              largeBlobBytes: prefixChunkingLimits.largeBlobBytes) : nil
        return PassPlan(training: training, batch: batch, chunking: chunking)
    }
}
