// Softmax over channels and the two losses Core ML trains with.
//
// Softmax: x, y [N, C, S] with S = H*W; for every (n, s), y[n, :, s] = exp(x - m) / sum_c exp(x - m)
// with m = max_c x[n, c, s] (subtracting the max changes nothing mathematically and avoids overflow).
// Backward: dx = y * (dy - sum_c dy * y).
//
// Cross-entropy: logits z [N, C], labels [N] (class indices stored as exact floats).
//   loss = (1/N) sum_n [logsumexp(z_n) - z_n[label_n]],  logsumexp(z) = m + log(sum_c exp(z_c - m))
//   dz   = (softmax(z_n) - onehot(label_n)) / N
//   correct = number of rows whose first arg-max (lowest index among equal maxima) is the label.
// Mean squared error: loss = (1/count) sum (x - t)^2, dx = 2 (x - t) / count.

import Foundation

extension Reference {
    static func validate(_ g: SoftmaxGeometry) throws {
        try requireSizes([("batch", g.batch), ("channels", g.channels), ("spatial size", g.spatial)], op: "softmax")
    }

    /// x [N, C, S] -> y [N, C, S], softmax over C.
    public static func softmaxForward(_ g: SoftmaxGeometry, input x: [Double]) throws -> [Double] {
        try validate(g)
        try require(x, count: g.count, "softmax input")
        let (N, C, S) = (g.batch, g.channels, g.spatial)
        var y = [Double](repeating: 0, count: g.count)
        for n in 0..<N {
            for s in 0..<S {
                var m = -Double.infinity
                for c in 0..<C { m = max(m, x[(n * C + c) * S + s]) }
                var sum = 0.0
                for c in 0..<C { sum += exp(x[(n * C + c) * S + s] - m) }
                for c in 0..<C { y[(n * C + c) * S + s] = exp(x[(n * C + c) * S + s] - m) / sum }
            }
        }
        return y
    }

    /// y (softmax output), dy [N, C, S] -> dx [N, C, S]: dx = y * (dy - sum_c dy * y).
    public static func softmaxBackward(_ g: SoftmaxGeometry, output y: [Double], outputGradient dy: [Double]) throws -> [Double] {
        try validate(g)
        try require(y, count: g.count, "softmax output")
        try require(dy, count: g.count, "softmax output gradient")
        let (N, C, S) = (g.batch, g.channels, g.spatial)
        var dx = [Double](repeating: 0, count: g.count)
        for n in 0..<N {
            for s in 0..<S {
                var dot = 0.0
                for c in 0..<C { dot += dy[(n * C + c) * S + s] * y[(n * C + c) * S + s] }
                for c in 0..<C {
                    let i = (n * C + c) * S + s
                    dx[i] = y[i] * (dy[i] - dot)
                }
            }
        }
        return dx
    }

    /// The class index a label float stands for, or an error naming the row.
    static func classIndex(_ label: Double, row: Int, classes: Int) throws -> Int {
        guard label.isFinite, label == label.rounded(), label >= 0, label < Double(classes) else {
            throw UpdraftError(.data, "label \(label) of example \(row) is not a class index in 0..<\(classes)",
                               hint: "labels are class indices stored as whole numbers")
        }
        return Int(label)
    }

    /// Fused softmax + categorical cross-entropy. z [N, C] (g.spatial must be 1), labels [N]
    /// -> loss (mean over the batch), dz [N, C], correct (rows whose first arg-max is the label).
    public static func softmaxCrossEntropy(_ g: SoftmaxGeometry, logits z: [Double], labels: [Double]) throws
        -> (loss: Double, logitsGradient: [Double], correct: Int) {
        try validate(g)
        guard g.spatial == 1 else {
            throw UpdraftError(.invalidArgument, "softmax cross-entropy takes logits [N, C], got spatial size \(g.spatial)",
                               hint: "flatten the logits or use a geometry with spatial = 1")
        }
        try requireSizes([("classes", g.channels)], positive: true, op: "softmax cross-entropy")
        let (N, C) = (g.batch, g.channels)
        try require(z, count: N * C, "cross-entropy logits")
        try require(labels, count: N, "cross-entropy labels")
        var loss = 0.0
        var dz = [Double](repeating: 0, count: N * C)
        var correct = 0
        for n in 0..<N {
            let label = try classIndex(labels[n], row: n, classes: C)
            var argMax = 0
            for c in 0..<C where z[n * C + c] > z[n * C + argMax] { argMax = c }  // strictly greater: first max wins
            let m = z[n * C + argMax]
            var sum = 0.0
            for c in 0..<C { sum += exp(z[n * C + c] - m) }
            let logSumExp = m + log(sum)
            loss += logSumExp - z[n * C + label]
            for c in 0..<C {
                let p = exp(z[n * C + c] - logSumExp)
                dz[n * C + c] = (p - (c == label ? 1 : 0)) / Double(N)
            }
            if argMax == label { correct += 1 }
        }
        return (N > 0 ? loss / Double(N) : 0, dz, correct)
    }

    /// Mean squared error over all elements: x, t [count] -> loss, dx [count].
    public static func meanSquaredError(input x: [Double], target t: [Double]) throws -> (loss: Double, inputGradient: [Double]) {
        try require(t, count: x.count, "mean squared error target")
        let count = Double(x.count)
        var loss = 0.0
        var dx = [Double](repeating: 0, count: x.count)
        for i in 0..<x.count {
            let d = x[i] - t[i]
            loss += d * d
            dx[i] = 2 * d / count
        }
        return (x.isEmpty ? 0 : loss / count, dx)
    }
}
