import UpdraftCore
import UpdraftBackends
import UpdraftModel
import UpdraftLayers
import UpdraftData

/// Forward, loss, backward and update passes of the executor, one op at a time through `Backend`.
extension Executor {
    /// Runs `layers` forward. Blobs read only by earlier layers go back to the pool as soon as their
    /// last reader has run, unless they are in `keep` or the tail's backward still needs them.
    func forward(layers: [GraphLayer], ws: Workspace, keep: Set<String>, fuse: Bool = true) throws {
        // The first layers a few images at a time where that keeps their large blobs in cache (Executor+Chunking.swift).
        let chunked = fuse ? try forwardChunked(layers: layers, ws: ws, keep: keep) : 0
        try forwardLayers(chunked == 0 ? layers : Array(layers.dropFirst(chunked)), ws: ws, keep: keep, fuse: fuse)
    }

    /// `forward`, each layer on the whole batch.
    func forwardLayers(_ layers: [GraphLayer], ws: Workspace, keep: Set<String>, fuse: Bool) throws {
        // Last reader of each blob within this run.
        var lastUse: [String: Int] = [:]
        for (i, l) in layers.enumerated() { for b in l.inputs { lastUse[b] = i } }
        let backwardNeeds = Set(training.tail.flatMap { $0.inputs + [$0.output] })
        // The frozen prefix's fp16 option: these blobs are stored as halves (Executor+HalfStorage.swift).
        let halfBlobs = training.halfStoredBlobs
        // What runs of each layer, as the step's plan says; unfused (`fuse` false): each layer as it stands.
        let plans = fuse ? layerPlans : [:]
        for (i, layer) in layers.enumerated() {
            let plan = plans[layer.name]
            if let plan, !plan.passes.contains(.forward) {
                // Run inside the convolution before it; a fused add's other input may be read for the last time here.
                for b in layer.inputs where lastUse[b] == i && !keep.contains(b) && !backwardNeeds.contains(b) { ws.dropValue(b) }
                continue
            }
            let backend = self.backend(for: layer)
            // Convolutions feeding a concat wrote its output already (see `TrainingGraph.concatSlices`).
            let slicing = fuse && backend.writesConvolutionSlices
            if slicing && training.slicedConcats.contains(layer.name) { continue }
            // A residual add (and the function after it) this convolution runs in its epilogue.
            let fusedResidual = plan?.residual
            let outBlob = plan?.output ?? layer.output
            // A layer that writes a half blob is a prefix layer: it takes half inputs as they are.
            let halfLayer = halfBlobs.contains(outBlob)
            try profiled(layer, "forward", on: backend, batch: ws.batch) {
            let inputs = try layer.inputs.map { try value($0, on: backend, ws: ws, acceptsHalf: halfLayer) }
            let inputHalf = layer.inputs.map { ws.isHalf($0) }
            let epilogue = fusedResidual != nil ? fusedResidual?.epilogue : plan?.epilogue
            if slicing, let slice = plan?.concatSlice {
                let whole: DeviceBuffer
                let wholeHalf = halfBlobs.contains(slice.concat.output)
                if let v = ws.value(slice.concat.output) {
                    whole = v.buffer
                } else {
                    whole = try ws.acquireOutput(slice.concat.output, count: HalfStorage.floats(
                        for: slice.concat.outputShape.withBatch(ws.batch).count, half: wholeHalf), on: backend)
                    ws.setValue(slice.concat.output, whole, on: backend, half: wholeHalf)
                }
                if wholeHalf || inputHalf[0] {
                    try forwardHalfStored(layer, inputs: inputs, inputHalf: inputHalf, output: whole, outputHalf: wholeHalf,
                                          slice: slice, epilogue: epilogue, ws: ws, backend: backend)
                } else {
                    try backend.convolutionForward(try layer.convolutionGeometry(batch: ws.batch)!, input: inputs[0],
                                                   weights: params(layer).weights!, bias: params(layer).bias, output: whole,
                                                   channelOffset: slice.offset, outputChannels: slice.channels,
                                                   epilogue: epilogue)
                }
            } else if case .layout(.alias) = layer.op {
                // The same memory under another shape.
                ws.setValue(layer.output, inputs[0], on: backend, half: inputHalf[0])
            } else {
                let outShape = layer.outputShape.withBatch(ws.batch)
                let out = try ws.acquireOutput(outBlob, count: HalfStorage.floats(for: outShape.count, half: halfLayer), on: backend)
                if halfLayer || inputHalf.contains(true) {
                    try forwardHalfStored(layer, inputs: inputs, inputHalf: inputHalf, output: out, outputHalf: halfLayer,
                                          slice: nil, epilogue: epilogue, ws: ws, backend: backend)
                } else {
                    let residual = try fusedResidual.map { try value($0.residual, on: backend, ws: ws) }
                    try runForward(layer, inputs: inputs, output: out, epilogue: epilogue, residual: residual, batch: ws.batch,
                                   backend: backend)
                }
                ws.setValue(outBlob, out, on: backend, half: halfLayer)
            }
            }
            for b in layer.inputs where lastUse[b] == i && !keep.contains(b) && !backwardNeeds.contains(b) {
                ws.dropValue(b)
            }
        }
    }

    /// A blob's value on `backend`, copied across through the host when the producer ran elsewhere.
    /// A blob stored as halves becomes floats (once: the float value replaces it) unless `acceptsHalf`.
    package func value(_ blob: String, on backend: Backend, ws: Workspace, acceptsHalf: Bool = false) throws -> DeviceBuffer {
        if ws.isHalf(blob) && (!acceptsHalf || ws.value(blob)?.backend !== backend) { try widenHalfValue(blob, ws: ws) }
        guard let v = ws.value(blob) else { throw UpdraftError(.invalidModel, "blob '\(blob)' is used before it is computed") }
        if v.backend === backend { return v.buffer }
        let moved = try ws.acquire(v.buffer.count, on: backend)
        try backend.upload(try v.backend.download(v.buffer), to: moved)
        ws.setValue(blob, moved, on: backend)
        return moved
    }

    /// Runs one layer forward through its kind (Layers/).
    func runForward(_ layer: GraphLayer, inputs x: [DeviceBuffer], output y: DeviceBuffer, epilogue: Activation?,
                    residual: DeviceBuffer? = nil, batch: Int, backend: Backend) throws {
        try layer.op.kind.forward(ForwardCall(executor: self, layer: layer, inputs: x, output: y, epilogue: epilogue,
                                              residual: residual, batch: batch, backend: backend))
    }

    /// The loss of a batch as it is being read back: queued, so that the backward pass can be queued
    /// behind it before the host waits for the number.
    struct PendingResult {
        var loss: PendingDownload
        var correct: PendingDownload?
        var count: Int
        /// The class scores (the loss input), `count` rows of `classes`, when predictions are kept.
        var scores: PendingDownload? = nil
        var classes = 0
        func resolve() throws -> BatchResult {
            var result = BatchResult(loss: Double(try loss.values()[0]), correct: Int(try correct?.values()[0].rounded() ?? 0), count: count)
            if let scores, classes > 0 {
                // Each row's first arg-max, as the `correct` count compares it with the label.
                let values = try scores.values()
                result.predicted = (0..<count).map { row in
                    let r = values[row * classes..<(row + 1) * classes]
                    return r.indices.reduce(r.startIndex) { r[$1] > r[$0] ? $1 : $0 } - r.startIndex
                }
            }
            return result
        }
    }

    /// Queues the loss of the batch, and (when `withGradient`) the gradient of the loss blob; the
    /// loss is read back without waiting (`PendingResult.resolve` waits).
    func queueLoss(ws: Workspace, targets: [TrainingExample.Target], withGradient: Bool) throws -> PendingResult {
        let backend = tailBackend
        let n = ws.batch
        let lossBuffer = try ws.scratch("loss", count: 1, on: backend)
        guard let loss = training.loss, let lossBlob = training.lossBlob else {
            throw UpdraftError(.invalidModel, "the model has no loss layer", hint: "only updatable models have a loss to evaluate")
        }
        guard let shape = graph.blobShapes[lossBlob] else {
            throw UpdraftError(.invalidModel, "the loss input '\(lossBlob)' has no shape")
        }
        let x = try value(lossBlob, on: backend, ws: ws)
        let itemCount = shape.itemCount
        switch loss.kind {
        case .categoricalCrossEntropy:
            var labels: [Float] = []
            labels.reserveCapacity(n)
            for t in targets {
                guard case let .classIndex(i) = t, i >= 0, i < itemCount else {
                    throw UpdraftError(.data, "a cross-entropy target must be a class index below \(itemCount), got \(t)")
                }
                labels.append(Float(i))
            }
            let labelBuffer = try ws.scratch("labels", count: n, on: backend)
            try backend.upload(labels, to: labelBuffer)
            let correct = try ws.scratch("correct", count: 1, on: backend)
            var grad: DeviceBuffer? = nil
            if withGradient { grad = try ws.acquire(n * itemCount, on: backend) }
            try backend.softmaxCrossEntropy(SoftmaxGeometry(batch: n, channels: itemCount, spatial: 1), logits: x,
                                            labels: labelBuffer, loss: lossBuffer, logitsGradient: grad, correct: correct)
            if let grad { try ws.addGradient(lossBlob, grad, on: backend) }
            return PendingResult(loss: try backend.downloadLater(lossBuffer), correct: try backend.downloadLater(correct), count: n,
                                 scores: keepsPredictions && !withGradient ? try backend.downloadLater(x) : nil, classes: itemCount)
        case .meanSquaredError:
            var values: [Float] = []
            values.reserveCapacity(n * itemCount)
            for t in targets {
                guard case let .values(tensor) = t, tensor.count == itemCount else {
                    throw UpdraftError(.data, "a mean-squared-error target must have \(itemCount) values (the shape of '\(loss.input)'), got \(t)")
                }
                values += tensor.data
            }
            let targetBuffer = try ws.scratch("targets", count: n * itemCount, on: backend)
            try backend.upload(values, to: targetBuffer)
            var grad: DeviceBuffer? = nil
            if withGradient { grad = try ws.acquire(n * itemCount, on: backend) }
            try backend.meanSquaredError(count: n * itemCount, input: x, target: targetBuffer, loss: lossBuffer, inputGradient: grad)
            if let grad { try ws.addGradient(lossBlob, grad, on: backend) }
            return PendingResult(loss: try backend.downloadLater(lossBuffer), correct: nil, count: n)
        }
    }

    /// Backward through the tail in reverse order: parameter gradients for updatable layers,
    /// input gradients for inputs that carry one. Nothing runs for the frozen prefix.
    func backward(ws: Workspace) throws {
        let backend = tailBackend
        for layer in training.tail.reversed() {
            guard let dy = ws.gradient(layer.output) else { continue }
            let wantsInput = layerPlans[layer.name]?.inputGradients ?? layer.inputs.map { _ in false }
            try profiled(layer, "backward", on: backend, batch: ws.batch, inputGradient: wantsInput.contains(true)) {
                try layer.op.kind.backward(BackwardCall(executor: self, layer: layer, ws: ws, backend: backend, outputGradient: dy,
                                                        wantsInput: wantsInput))
            }
        }
    }

    /// One fused optimizer pass per updatable parameter tensor. While it runs the parameters are
    /// part old, part new: `isMidUpdate` stays true if a pass fails after the first tensor changed, so
    /// recovery knows not to trust this executor's state. A failure before any tensor changed leaves
    /// the state (and the step count) as it was.
    func update(_ hyper: TrainingParameters) throws { try update(optimizer, hyper) }

    /// `update` with the optimizer's type opened, so its settings are read once per step.
    private func update<O: Optimizer>(_ o: O.Type, _ hyper: TrainingParameters) throws {
        let h = O.hyperparameters(hyper.values)
        let step = stepCount + 1
        var updated = 0
        do {
            // One layer's tensors after another (weights, then bias), each layer one row of a profile.
            var tensors = trainableTensors()[...]
            while let layer = tensors.first?.layer {
                let group = tensors.prefix { $0.layer == layer }
                tensors = tensors.dropFirst(group.count)
                try profiledUpdate(layer: layer, counts: group.map(\.slot.count)) {
                    for t in group {
                        try O.step(h, step: step, on: tailBackend, parameter: t.parameter, gradient: t.slot.gradient,
                                   state: t.slot.state, count: t.slot.count)
                        updated += 1
                        isMidUpdate = true
                    }
                }
            }
        } catch {
            if updated > 0 { stepCount = step }
            throw error
        }
        stepCount = step
        isMidUpdate = false
    }
}
