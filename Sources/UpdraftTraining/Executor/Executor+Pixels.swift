import UpdraftCore
import UpdraftBackends
import UpdraftLayers
import UpdraftData

/// Image batches as 8-bit samples (`PixelRows`, from a `PixelBatchProvider`): uploaded at a byte a
/// sample and converted on the input's backend, the model's image scaler applied in the same pass
/// (`Backend.uploadPixels`). The results are bit for bit those of the float tensors of the same images.
extension Executor {
    /// `computeGradients` on a batch of images given as samples, with their targets.
    func computeGradients(pixels: PixelRows, targets: [TrainingExample.Target]) throws -> BatchResult {
        try runBatch(targets: targets, layers: training.prefix + training.tail, keep: training.boundary, gradients: true) {
            try uploadInput(pixels: pixels, ws: $0)
        }
    }

    /// Loss and correct count of a batch of images given as samples (validation).
    func evaluate(pixels: PixelRows, targets: [TrainingExample.Target]) throws -> BatchResult {
        try runBatch(targets: targets, layers: training.prefix + training.tail, gradients: false) {
            try uploadInput(pixels: pixels, ws: $0)
        }
    }

    /// Loss and correct count of a batch of images as 8-bit samples (`PixelBatchProvider.pixelBatch(at:)`).
    public func evaluate(_ batch: PixelBatch) throws -> BatchResult {
        try evaluate(pixels: batch.rows, targets: batch.targets)
    }

    /// `predict(_:blob:)` for a batch of images as 8-bit samples: the values of `blob` (default: the
    /// class probabilities, else the first output), `[N] + blob shape`.
    public func predict(_ batch: PixelBatch, blob: String? = nil) throws -> Tensor {
        try predict(count: batch.rows.count, blob: blob) { try uploadInput(pixels: batch.rows, ws: $0) }
    }

    /// Sets the network input of `ws` from the rows' samples: one `uploadPixels` on the backend that
    /// receives the input, with the model's scaler (`uploadInput`'s `channelAffine`) applied there.
    func uploadInput(pixels: PixelRows, ws: Workspace) throws {
        let itemCount = graph.input.shape.itemCount
        guard pixels.count == ws.batch, pixels.rowBytes == itemCount else {
            throw UpdraftError(.data, "\(pixels.count) images of \(pixels.rowBytes) samples do not match the model input \(graph.input.shape) (batch \(ws.batch))",
                               hint: "check the data's image size against `updraft inspect`")
        }
        let backend = training.prefix.isEmpty ? tailBackend : prefixBackend
        let b = try ws.acquire(ws.batch * itemCount, on: backend)
        var channels = max(1, graph.input.shape.c)
        var affine: (scale: DeviceBuffer, shift: DeviceBuffer)? = nil
        if let pre = graph.input.preprocessing, !pre.bias.isEmpty {
            channels = pre.bias.count
            affine = try preprocessing(on: backend, scale: pre.scale, bias: pre.bias)
        }
        guard itemCount % channels == 0 else {
            throw UpdraftError(.invalidModel, "the model input \(graph.input.shape) does not split into \(channels) channels")
        }
        try backend.uploadPixels(pixels.samples, shape: Shape(n: ws.batch, c: channels, h: itemCount / channels, w: 1),
                                 scale: affine?.scale, shift: affine?.shift, to: b)
        ws.setValue(graph.input.name, b, on: backend)
    }
}
