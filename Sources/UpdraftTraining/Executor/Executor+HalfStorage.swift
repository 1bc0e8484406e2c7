import UpdraftCore
import UpdraftBackends
import UpdraftModel
import UpdraftLayers
import UpdraftData

/// The frozen prefix's fp16 activations (`TrainingGraph.halfPrecisionPrefix`): every blob a prefix
/// layer writes is stored as IEEE halves, two per float of its buffer, so the prefix's activations
/// take half the bytes. Arithmetic stays fp32: a backend kernel that reads and writes halves itself
/// (`Backend.convolutionForward(…, storage:)`, `poolingForward(…, storage:)`: OpenCL's convolution
/// and windowed pooling) runs when there is one; any other op runs in fp32 between conversions at its
/// boundary (half inputs widened into float scratch, the float result rounded into the half output),
/// so correctness never depends on which ops have half kernels. On the CPU and reference backends
/// every op takes that path: it is the CPU twin (same rounding: nearest even on every store).
extension Executor {
    /// Runs one prefix layer whose inputs (`inputHalf`) and/or output (`outputHalf`) are halves.
    /// `slice`: a convolution writing its channels of a concat's output (`TrainingGraph.concatSlices`).
    func forwardHalfStored(_ layer: GraphLayer, inputs: [DeviceBuffer], inputHalf: [Bool], output: DeviceBuffer,
                           outputHalf: Bool, slice: TrainingGraph.ConcatSlice?, epilogue: Activation?,
                           ws: Workspace, backend: Backend) throws {
        let batch = ws.batch
        let storage = HalfStorage(input: inputHalf.first ?? false, output: outputHalf)
        let call = ForwardCall(executor: self, layer: layer, inputs: inputs, output: output, epilogue: epilogue,
                               batch: batch, backend: backend)
        if try layer.op.kind.forwardHalfStored(call, storage: storage, slice: slice) { return }
        // No half kernel: fp32 between conversions.
        var scratch: [DeviceBuffer] = []
        defer { for b in scratch { ws.release(b, from: backend) } }
        var floatInputs: [DeviceBuffer] = []
        for (k, input) in inputs.enumerated() {
            guard inputHalf[k] else { floatInputs.append(input); continue }
            let count = layer.inputShapes[k].withBatch(batch).count
            let wide = try ws.acquire(count, on: backend)
            scratch.append(wide)
            try backend.copyRows(input, rows: [0], to: wide, rows: [0], rowLength: count, toHalf: false)
            floatInputs.append(wide)
        }
        let result: DeviceBuffer
        if outputHalf {
            let count = slice == nil ? layer.outputShape.withBatch(batch).count
                : try layer.convolutionGeometry(batch: batch)!.outputShape.count
            result = try ws.acquire(count, on: backend)
            scratch.append(result)
        } else {
            result = output
        }
        if let slice, !outputHalf {
            let p = params(layer)
            try backend.convolutionForward(try layer.convolutionGeometry(batch: batch)!, input: floatInputs[0], weights: p.weights!,
                                           bias: p.bias, output: result, channelOffset: slice.offset,
                                           outputChannels: slice.channels, epilogue: epilogue)
        } else {
            try runForward(layer, inputs: floatInputs, output: result, epilogue: epilogue, batch: batch, backend: backend)
        }
        guard outputHalf else { return }
        if let slice {
            // Image n's channel c of this convolution is channel offset + c of the concat's image n.
            let g = try layer.convolutionGeometry(batch: batch)!
            let plane = g.outHeight * g.outWidth
            var from: [Int] = [], to: [Int] = []
            for n in 0..<batch {
                for c in 0..<g.outChannels {
                    from.append(n * g.outChannels + c)
                    to.append(n * slice.channels + slice.offset + c)
                }
            }
            try backend.copyRows(result, rows: from, to: output, rows: to, rowLength: plane, toHalf: true)
        } else {
            try backend.copyRows(result, rows: [0], to: output, rows: [0], rowLength: layer.outputShape.withBatch(batch).count,
                                 toHalf: true)
        }
    }

    /// Replaces `blob`'s half value by its floats (on the same backend): what every reader outside the
    /// prefix (the tail, the feature cache, prediction) receives.
    func widenHalfValue(_ blob: String, ws: Workspace) throws {
        guard ws.isHalf(blob), let v = ws.value(blob) else { return }
        guard let shape = graph.blobShapes[blob] else { throw UpdraftError(.invalidModel, "blob '\(blob)' has no shape") }
        let count = shape.withBatch(ws.batch).count
        let wide = try ws.acquire(count, on: v.backend)
        try v.backend.copyRows(v.buffer, rows: [0], to: wide, rows: [0], rowLength: count, toHalf: false)
        ws.setValue(blob, wide, on: v.backend)
    }

    /// `blob`'s value as floats (widened first when it is stored as halves).
    func floatValue(_ blob: String, ws: Workspace) throws -> (buffer: DeviceBuffer, backend: Backend)? {
        try widenHalfValue(blob, ws: ws)
        return ws.value(blob)
    }
}
