// Layer normalization as one unit in the core: its geometry, its cost, and its Double reference
// (forward and input gradient). Core ML's layerNormalization layer (NeuralNetworkLayer field 1350)
// normalizes each contiguous group of the trailing `normalizedShape` axes, then scales and shifts
// each position of the group by gamma and beta.
//
// For every row r (one group of `groupSize` values), with j the position in the row:
//   mean = sum(x) / G, var = sum((x - mean)²) / G, inv = 1 / sqrt(var + eps)
//   xhat = (x - mean) inv,  y[j] = gamma[j] xhat[j] + beta[j]
//   g[j] = dy[j] gamma[j],  dx = inv (g - mean(g) - xhat mean(g xhat))

/// One layer normalization call: `rows` groups of `groupSize` contiguous values (the batch times the
/// groups per example), each normalized on its own, and gamma and beta of `groupSize` values each.
public struct LayerNormalizationGeometry: Hashable, Sendable, CustomStringConvertible {
    /// Groups in the batch: batch × (values per example / groupSize).
    public var rows: Int
    /// Values normalized together: the product of the layer's normalizedShape.
    public var groupSize: Int
    /// Added to the variance before the square root.
    public var epsilon: Float

    public init(rows: Int, groupSize: Int, epsilon: Float) {
        self.rows = rows; self.groupSize = groupSize; self.epsilon = epsilon
    }

    /// The values of x, y, dy and dx.
    public var count: Int { rows * groupSize }

    public var description: String { "\(rows)x\(groupSize) eps \(epsilon)" }

    /// Throws unless the sizes can be run: rows ≥ 0, groupSize ≥ 1, epsilon ≥ 0 and finite.
    public func validate() throws {
        guard rows >= 0, groupSize >= 1 else {
            throw UpdraftError(.invalidArgument, "layer normalization of \(rows) rows of \(groupSize): rows must be at least 0 and the group at least 1")
        }
        guard epsilon >= 0, epsilon.isFinite else {
            throw UpdraftError(.invalidArgument, "layer normalization epsilon \(epsilon) must be finite and at least 0")
        }
    }

    /// Two passes of statistics and one of normalize-scale-shift: x read twice, y written, gamma and beta read.
    public var forwardCost: OpCost {
        OpCost(flops: Double(7 * count), bytes: f32Bytes(count, count, count, groupSize, groupSize))
    }

    /// The statistics again, two sums over dy and the gradient: x read three times, dy twice, dx written.
    public var backwardCost: OpCost {
        OpCost(flops: Double(12 * count), bytes: f32Bytes(count, count, count, count, count, count, groupSize))
    }
}

extension Reference {
    /// Mean and 1 / sqrt(variance + eps) of one row.
    private static func rowStatistics(_ x: ArraySlice<Double>, _ eps: Double) -> (mean: Double, inv: Double) {
        let n = Double(x.count)
        let mean = x.reduce(0, +) / n
        let variance = x.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / n
        return (mean, 1 / (variance + eps).squareRoot())
    }

    private static func requireLayerNormalization(_ g: LayerNormalizationGeometry, _ arrays: [(String, [Double], Int)]) throws {
        try g.validate()
        for (what, a, count) in arrays { try require(a, count: count, "layer normalization \(what) (\(g))") }
    }

    /// y = gamma xhat + beta, row by row.
    public static func layerNormalizationForward(_ g: LayerNormalizationGeometry, input x: [Double], gamma: [Double],
                                                 beta: [Double]) throws -> [Double] {
        try requireLayerNormalization(g, [("input", x, g.count), ("gamma", gamma, g.groupSize), ("beta", beta, g.groupSize)])
        var y = [Double](repeating: 0, count: g.count)
        for r in 0..<g.rows {
            let base = r * g.groupSize
            let (mean, inv) = rowStatistics(x[base..<base + g.groupSize], Double(g.epsilon))
            for j in 0..<g.groupSize { y[base + j] = gamma[j] * (x[base + j] - mean) * inv + beta[j] }
        }
        return y
    }

    /// dx for the frozen gamma: dx = inv (g - mean(g) - xhat mean(g xhat)) with g = dy gamma.
    public static func layerNormalizationBackward(_ g: LayerNormalizationGeometry, input x: [Double], gamma: [Double],
                                                  outputGradient dy: [Double]) throws -> [Double] {
        try requireLayerNormalization(g, [("input", x, g.count), ("gamma", gamma, g.groupSize), ("output gradient", dy, g.count)])
        var dx = [Double](repeating: 0, count: g.count)
        let n = Double(g.groupSize)
        for r in 0..<g.rows {
            let base = r * g.groupSize
            let (mean, inv) = rowStatistics(x[base..<base + g.groupSize], Double(g.epsilon))
            var sumG = 0.0, sumGXhat = 0.0
            for j in 0..<g.groupSize {
                let gj = dy[base + j] * gamma[j]
                sumG += gj
                sumGXhat += gj * (x[base + j] - mean) * inv
            }
            for j in 0..<g.groupSize {
                let xhat = (x[base + j] - mean) * inv
                dx[base + j] = inv * (dy[base + j] * gamma[j] - sumG / n - xhat * sumGXhat / n)
            }
        }
        return dx
    }
}
