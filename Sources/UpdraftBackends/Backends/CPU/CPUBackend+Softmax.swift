import Foundation
import UpdraftCore

// Softmax over channels and the losses. Softmax data is [N, C, S] (S = H*W): for each (n, s) the C
// values are S apart, so work items are (image, block of spatial positions) and the loops run over c
// outside and s inside, contiguous. Losses accumulate per row in Double and are summed in row order.
//   softmax   y = exp(x - max_c x) / sum_c exp(x - max_c x);   backward dx = y * (dy - sum_c dy * y)
//   cross-entropy on logits [N, C]: loss = mean_n (logsumexp(z_n) - z_n[label_n]),
//             dz = (softmax(z_n) - onehot(label_n)) / N, correct = rows whose first arg-max is the label
//   mean squared error: loss = mean (x - t)^2, dx = 2 (x - t) / count
extension CPUBackend {
    /// Spatial positions one softmax work item handles (the width of its running max / sum vectors).
    private static let spatialBlock = 256

    func validate(_ g: SoftmaxGeometry) throws {
        try requireSizes(["batch": g.batch, "channels": g.channels, "spatial size": g.spatial], op: "softmax")
    }

    /// Runs `body(n, s0..<s1, scratch)` for every image and block of spatial positions, over threads
    /// when the tensor is large; `scratch` holds 2 * spatialBlock floats for the item.
    private func forEachSoftmaxItem(_ g: SoftmaxGeometry, _ body: (Int, Range<Int>, UnsafeMutablePointer<Float>) -> Void) {
        let block = Self.spatialBlock
        let blocks = (g.spatial + block - 1) / block
        let grain = max(1, CPUParallel.transcendentalGrain / max(1, g.channels * min(block, g.spatial)))
        parallelChunks(g.batch * blocks, grain: grain) { items in
            withUnsafeTemporaryAllocation(of: Float.self, capacity: 2 * block) { scratch in
                guard let s = scratch.baseAddress else { return }
                for item in items {
                    let n = item / blocks, s0 = (item % blocks) * block
                    body(n, s0..<min(g.spatial, s0 + block), s)
                }
            }
        }
    }

    /// Over channels, per image and block of 256 spatial positions, max-subtracted, in float32.
    public func softmaxForward(_ g: SoftmaxGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try validate(g)
        let x = try pointer(input, g.count, "softmax input")
        let y = try pointer(output, g.count, "softmax output")
        let (C, S) = (g.channels, g.spatial)
        forEachSoftmaxItem(g) { n, span, scratch in
            let len = span.count
            let xs = x + n * C * S + span.lowerBound, ys = y + n * C * S + span.lowerBound
            let m = scratch, sum = scratch + Self.spatialBlock
            m.update(repeating: -Float.infinity, count: len)
            sum.update(repeating: 0, count: len)
            for c in 0..<C {
                let row = xs + c * S
                for s in 0..<len { m[s] = Swift.max(m[s], row[s]) }
            }
            for c in 0..<C {
                let row = xs + c * S, out = ys + c * S
                for s in 0..<len { let e = exp(row[s] - m[s]); out[s] = e; sum[s] += e }
            }
            for c in 0..<C {
                let out = ys + c * S
                for s in 0..<len { out[s] /= sum[s] }
            }
        }
    }

    /// dx = y * (dy - sum_c dy * y), per image and block of spatial positions.
    public func softmaxBackward(_ g: SoftmaxGeometry, output: DeviceBuffer, outputGradient: DeviceBuffer,
                                inputGradient: DeviceBuffer) throws {
        try validate(g)
        let y = try pointer(output, g.count, "softmax output")
        let dy = try pointer(outputGradient, g.count, "softmax output gradient")
        let dx = try pointer(inputGradient, g.count, "softmax input gradient")
        let (C, S) = (g.channels, g.spatial)
        forEachSoftmaxItem(g) { n, span, scratch in
            let len = span.count, offset = n * C * S + span.lowerBound
            let dot = scratch
            dot.update(repeating: 0, count: len)
            for c in 0..<C {
                let yr = y + offset + c * S, dyr = dy + offset + c * S
                for s in 0..<len { dot[s] += dyr[s] * yr[s] }
            }
            for c in 0..<C {
                let yr = y + offset + c * S, dyr = dy + offset + c * S, dxr = dx + offset + c * S
                for s in 0..<len { dxr[s] = yr[s] * (dyr[s] - dot[s]) }
            }
        }
    }

    /// Logits must be [N, C] (spatial 1); per-row losses in Double summed in row order; throws `.data` for a label that is not a class index.
    public func softmaxCrossEntropy(_ g: SoftmaxGeometry, logits: DeviceBuffer, labels: DeviceBuffer, loss: DeviceBuffer,
                                    logitsGradient: DeviceBuffer?, correct: DeviceBuffer?) throws {
        try validate(g)
        guard g.spatial == 1 else {
            throw UpdraftError(.invalidArgument, "\(name) softmax cross-entropy takes logits [N, C], got spatial size \(g.spatial)",
                               hint: "flatten the logits or use a geometry with spatial = 1")
        }
        try requireSizes(["classes": g.channels], positive: true, op: "softmax cross-entropy")
        let (N, C) = (g.batch, g.channels)
        let z = try pointer(logits, N * C, "cross-entropy logits")
        let t = try pointer(labels, N, "cross-entropy labels")
        let lossOut = try pointer(loss, 1, "cross-entropy loss")
        let dz = try logitsGradient.map { try pointer($0, N * C, "cross-entropy logits gradient") }
        let correctOut = try correct.map { try pointer($0, 1, "cross-entropy correct count") }
        for n in 0..<N {
            let label = t[n]
            guard label.isFinite, label == label.rounded(), label >= 0, label < Float(C) else {
                throw UpdraftError(.data, "label \(label) of example \(n) is not a class index in 0..<\(C)",
                                   hint: "labels are class indices stored as whole numbers")
            }
        }
        // Per row: its loss and whether it was right, summed afterwards in row order.
        let rowLoss = UnsafeMutablePointer<Double>.allocate(capacity: max(1, N))
        let rowCorrect = UnsafeMutablePointer<Bool>.allocate(capacity: max(1, N))
        defer { rowLoss.deallocate(); rowCorrect.deallocate() }
        let invN = 1 / Float(N)
        parallelChunks(N, grain: max(1, CPUParallel.transcendentalGrain / C)) { rows in
            for n in rows {
                let row = z + n * C, label = Int(t[n])
                var argMax = 0
                for c in 1..<C where row[c] > row[argMax] { argMax = c }
                let m = row[argMax]
                var sum: Float = 0
                for c in 0..<C { sum += exp(row[c] - m) }
                let logSumExp = m + log(sum)
                rowLoss[n] = Double(logSumExp) - Double(row[label])
                rowCorrect[n] = argMax == label
                if let dz {
                    let out = dz + n * C
                    for c in 0..<C { out[c] = exp(row[c] - logSumExp) * invN }
                    out[label] -= invN
                }
            }
        }
        var total = 0.0, right = 0
        for n in 0..<N { total += rowLoss[n]; if rowCorrect[n] { right += 1 } }
        lossOut[0] = N > 0 ? Float(total / Double(N)) : 0
        correctOut?[0] = Float(right)
    }

    /// loss = mean (x - t)^2 accumulated in Double; gradient 2 (x - t) / count.
    public func meanSquaredError(count: Int, input: DeviceBuffer, target: DeviceBuffer, loss: DeviceBuffer,
                                 inputGradient: DeviceBuffer?) throws {
        try requireSizes(["element count": count], op: "mean squared error")
        let x = try pointer(input, count, "mean squared error input")
        let t = try pointer(target, count, "mean squared error target")
        let lossOut = try pointer(loss, 1, "mean squared error loss")
        let dx = try inputGradient.map { try pointer($0, count, "mean squared error input gradient") }
        let scale = 2 / Float(count)
        let total = parallelSum(count, grain: CPUParallel.elementGrain) { r in
            var acc = 0.0
            for i in r {
                let d = x[i] - t[i]
                acc += Double(d) * Double(d)
                if let dx { dx[i] = d * scale }
            }
            return acc
        }
        lossOut[0] = count > 0 ? Float(total / Double(count)) : 0
    }

    /// The sum of `body` over contiguous chunks of `0..<count` (run in parallel like `parallelChunks`),
    /// added in chunk order.
    func parallelSum(_ count: Int, grain: Int, _ body: (Range<Int>) -> Double) -> Double {
        guard count > 0 else { return 0 }
        let pieces = min(threadCount, count / max(1, grain))
        if pieces <= 1 { return body(0..<count) }
        let partial = UnsafeMutablePointer<Double>.allocate(capacity: pieces)
        defer { partial.deallocate() }
        forkJoin(iterations: pieces) { i in
            partial[i] = body((count * i / pieces)..<(count * (i + 1) / pieces))
        }
        return (0..<pieces).reduce(0) { $0 + partial[$1] }
    }
}
