// Local response normalization (across channels), L2 normalization (over each example) and instance
import Foundation
// normalization (over each (n, c) plane), forward and backward, in Double.

extension Reference {
    // MARK: LRN — s[c] = k + alpha / n * sum_{c' in W(c)} x[c']², y[c] = x[c] * s[c]^-beta

    /// The window of channel c: c - before ... c - before + localSize - 1, clipped to [0, C).
    static func lrnWindow(_ l: LRNSpec, c: Int, channels C: Int) -> Range<Int> {
        max(0, c - l.before)..<min(C, c - l.before + l.localSize)
    }

    /// s for every element of x.
    static func lrnScale(_ g: SpatialGeometry, _ l: LRNSpec, _ x: [Double]) -> [Double] {
        let (C, S) = (g.channels, g.inHeight * g.inWidth)
        var s = [Double](repeating: 0, count: x.count)
        let a = Double(l.alpha) / Double(l.localSize)
        for n in 0..<g.batch {
            for c in 0..<C {
                for p in 0..<S {
                    var sum = 0.0
                    for j in lrnWindow(l, c: c, channels: C) { let v = x[(n * C + j) * S + p]; sum += v * v }
                    s[(n * C + c) * S + p] = Double(l.k) + a * sum
                }
            }
        }
        return s
    }

    static func lrnForward(_ g: SpatialGeometry, _ l: LRNSpec, _ x: [Double]) -> [Double] {
        let s = lrnScale(g, l, x)
        return (0..<x.count).map { x[$0] * pow(s[$0], -Double(l.beta)) }
    }

    /// dx[j] = dy[j] s[j]^-beta - 2 alpha beta / n * x[j] * sum_{c : j in W(c)} dy[c] x[c] s[c]^(-beta-1).
    static func lrnBackward(_ g: SpatialGeometry, _ l: LRNSpec, _ x: [Double], _ dy: [Double]) -> [Double] {
        let (C, S) = (g.channels, g.inHeight * g.inWidth)
        let s = lrnScale(g, l, x)
        let beta = Double(l.beta), a = Double(l.alpha) / Double(l.localSize)
        var dx = [Double](repeating: 0, count: x.count)
        for n in 0..<g.batch {
            for c in 0..<C {
                for p in 0..<S {
                    let i = (n * C + c) * S + p
                    dx[i] += dy[i] * pow(s[i], -beta)
                    let common = -2 * a * beta * dy[i] * x[i] * pow(s[i], -beta - 1)
                    for j in lrnWindow(l, c: c, channels: C) {
                        let k = (n * C + j) * S + p
                        dx[k] += common * x[k]
                    }
                }
            }
        }
        return dx
    }

    // MARK: L2 normalize — per example: r = (sum x² + eps)^-1/2, y = x r

    static func l2NormalizeForward(_ g: SpatialGeometry, _ eps: Double, _ x: [Double]) -> [Double] {
        let m = g.inputShape.itemCount
        var y = x
        for n in 0..<g.batch {
            var sum = 0.0
            for i in 0..<m { sum += x[n * m + i] * x[n * m + i] }
            let r = 1 / (sum + eps).squareRoot()
            for i in 0..<m { y[n * m + i] = x[n * m + i] * r }
        }
        return y
    }

    /// dx = r dy - r³ x sum(dy x).
    static func l2NormalizeBackward(_ g: SpatialGeometry, _ eps: Double, _ x: [Double], _ dy: [Double]) -> [Double] {
        let m = g.inputShape.itemCount
        var dx = x
        for n in 0..<g.batch {
            var sum = 0.0, dot = 0.0
            for i in 0..<m { sum += x[n * m + i] * x[n * m + i]; dot += dy[n * m + i] * x[n * m + i] }
            let r = 1 / (sum + eps).squareRoot()
            for i in 0..<m { dx[n * m + i] = r * dy[n * m + i] - r * r * r * x[n * m + i] * dot }
        }
        return dx
    }

    // MARK: Instance normalization — per (n, c) plane: xhat = (x - mean) / sqrt(var + eps)

    /// Mean and 1 / sqrt(biased variance + eps) of each plane.
    static func planeStatistics(_ g: SpatialGeometry, _ eps: Double, _ x: [Double]) -> [(mean: Double, inv: Double)] {
        let S = g.inHeight * g.inWidth
        return (0..<(g.batch * g.channels)).map { p in
            var mean = 0.0
            for i in 0..<S { mean += x[p * S + i] }
            mean /= Double(max(S, 1))
            var variance = 0.0
            for i in 0..<S { let d = x[p * S + i] - mean; variance += d * d }
            variance /= Double(max(S, 1))
            return (mean, 1 / (variance + eps).squareRoot())
        }
    }

    static func instanceNormalizationForward(_ g: SpatialGeometry, _ eps: Double, _ x: [Double]) -> [Double] {
        let S = g.inHeight * g.inWidth
        var y = x
        for (p, st) in planeStatistics(g, eps, x).enumerated() {
            for i in 0..<S { y[p * S + i] = (x[p * S + i] - st.mean) * st.inv }
        }
        return y
    }

    /// dx = inv * (dy - mean(dy) - xhat * mean(dy * xhat)).
    static func instanceNormalizationBackward(_ g: SpatialGeometry, _ eps: Double, _ x: [Double], _ dy: [Double]) -> [Double] {
        let S = g.inHeight * g.inWidth
        var dx = x
        for (p, st) in planeStatistics(g, eps, x).enumerated() {
            var meanDy = 0.0, meanDyXhat = 0.0
            for i in 0..<S {
                meanDy += dy[p * S + i]
                meanDyXhat += dy[p * S + i] * (x[p * S + i] - st.mean) * st.inv
            }
            meanDy /= Double(S); meanDyXhat /= Double(S)
            for i in 0..<S {
                let xhat = (x[p * S + i] - st.mean) * st.inv
                dx[p * S + i] = st.inv * (dy[p * S + i] - meanDy - xhat * meanDyXhat)
            }
        }
        return dx
    }
}
