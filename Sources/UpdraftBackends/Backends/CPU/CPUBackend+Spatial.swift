import Foundation
import UpdraftCore

// The spatial ops on the CPU: padding one (n, c) plane per work item (backward passes zero the plane
// and scatter into it, so no two threads write one element), resampling likewise
// (CPUBackend+Resample.swift); LRN by planes of window sums; L2 normalization per example and
// instance normalization per plane, with sums kept in Double.
extension CPUBackend {
    func spatialGrain(_ planeSize: Int) -> Int { max(1, CPUParallel.elementGrain / max(1, planeSize)) }

    /// One (n, c) plane per work item for padding, upsampling and LRN; normalizations keep their sums in Double.
    public func spatialForward(_ g: SpatialGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        let x = try pointer(input, g.inputShape.count, "\(g.op.familyName) input \(g.inputShape)")
        let y = try pointer(output, g.outputShape.count, "\(g.op.familyName) output \(g.outputShape)")
        let planes = g.batch * g.channels
        let (H, W, Ho, Wo) = (g.inHeight, g.inWidth, g.outHeight, g.outWidth)
        switch g.op {
        case let .padding(p):
            var fill: Float = 0
            if case let .constant(v) = p.mode { fill = v }
            let columns = (0..<Wo).map { SpatialGeometry.paddingSource($0 - p.left, size: W, mode: p.mode) ?? -1 }
            parallelChunks(planes, grain: spatialGrain(Ho * Wo)) { range in
                for plane in range {
                    let src = x + plane * H * W, dst = y + plane * Ho * Wo
                    for oh in 0..<Ho {
                        let row = dst + oh * Wo
                        guard let h = SpatialGeometry.paddingSource(oh - p.top, size: H, mode: p.mode) else {
                            for ow in 0..<Wo { row[ow] = fill }
                            continue
                        }
                        let srow = src + h * W
                        for ow in 0..<Wo { let w = columns[ow]; row[ow] = w >= 0 ? srow[w] : fill }
                    }
                }
            }
        case .resampling:
            try resampleForward(g, x, y)
        case let .lrn(l):
            let S = H * W, C = g.channels
            let a = l.alpha / Float(l.localSize), beta = l.beta
            parallelChunks(planes, grain: spatialGrain(S * l.localSize)) { range in
                var sums = [Float](repeating: 0, count: S)
                for plane in range {
                    lrnSums(x, plane: plane, channels: C, spatial: S, l, into: &sums)
                    let src = x + plane * S, dst = y + plane * S
                    for i in 0..<S { dst[i] = src[i] * powf(l.k + a * sums[i], -beta) }
                }
            }
        case let .l2Normalize(eps):
            let m = g.inputShape.itemCount
            parallelChunks(g.batch, grain: spatialGrain(m)) { range in
                for n in range {
                    let src = x + n * m, dst = y + n * m
                    var sum = 0.0
                    for i in 0..<m { sum += Double(src[i]) * Double(src[i]) }
                    let r = Float(1 / (sum + Double(eps)).squareRoot())
                    for i in 0..<m { dst[i] = src[i] * r }
                }
            }
        case let .instanceNormalization(eps):
            let S = H * W
            parallelChunks(planes, grain: spatialGrain(S)) { range in
                for plane in range {
                    let src = x + plane * S, dst = y + plane * S
                    let (mean, inv) = planeStatistics(src, S, eps)
                    for i in 0..<S { dst[i] = (src[i] - mean) * inv }
                }
            }
        }
    }

    /// Zeroes each input-gradient plane and scatters into it, so no two threads write one element.
    public func spatialBackward(_ g: SpatialGeometry, input: DeviceBuffer, output: DeviceBuffer, outputGradient: DeviceBuffer,
                                inputGradient: DeviceBuffer) throws {
        let x = try pointer(input, g.inputShape.count, "\(g.op.familyName) input \(g.inputShape)")
        _ = try pointer(output, g.outputShape.count, "\(g.op.familyName) output \(g.outputShape)")
        let dy = try pointer(outputGradient, g.outputShape.count, "\(g.op.familyName) output gradient \(g.outputShape)")
        let dx = try pointer(inputGradient, g.inputShape.count, "\(g.op.familyName) input gradient \(g.inputShape)")
        let planes = g.batch * g.channels
        let (H, W, Ho, Wo) = (g.inHeight, g.inWidth, g.outHeight, g.outWidth)
        switch g.op {
        case let .padding(p):
            let columns = (0..<Wo).map { SpatialGeometry.paddingSource($0 - p.left, size: W, mode: p.mode) ?? -1 }
            parallelChunks(planes, grain: spatialGrain(Ho * Wo)) { range in
                for plane in range {
                    let d = dx + plane * H * W, src = dy + plane * Ho * Wo
                    d.update(repeating: 0, count: H * W)
                    for oh in 0..<Ho {
                        guard let h = SpatialGeometry.paddingSource(oh - p.top, size: H, mode: p.mode) else { continue }
                        let row = src + oh * Wo, drow = d + h * W
                        for ow in 0..<Wo { let w = columns[ow]; if w >= 0 { drow[w] += row[ow] } }
                    }
                }
            }
        case .resampling:
            try resampleBackward(g, dy, dx)
        case let .lrn(l):
            // t[c] = dy[c] x[c] s[c]^(-beta-1) for every element first, then each dx gathers its window.
            let S = H * W, C = g.channels
            let a = l.alpha / Float(l.localSize), beta = l.beta
            var scaled = [Float](repeating: 0, count: g.inputShape.count)
            scaled.withUnsafeMutableBufferPointer { tb in
                let t = tb.baseAddress!
                parallelChunks(planes, grain: spatialGrain(S * l.localSize)) { range in
                    var sums = [Float](repeating: 0, count: S)
                    for plane in range {
                        lrnSums(x, plane: plane, channels: C, spatial: S, l, into: &sums)
                        let base = plane * S
                        for i in 0..<S {
                            let s = l.k + a * sums[i]
                            let sb = powf(s, -beta)
                            t[base + i] = dy[base + i] * x[base + i] * sb / s
                            dx[base + i] = dy[base + i] * sb  // the direct term; the window term follows
                        }
                    }
                }
                let factor = -2 * a * beta
                parallelChunks(planes, grain: spatialGrain(S * l.localSize)) { range in
                    for plane in range {
                        let (n, j) = (plane / C, plane % C)
                        // channels c whose window holds j
                        let lo = max(0, j - l.localSize + 1 + l.before), hi = min(C - 1, j + l.before)
                        guard lo <= hi else { continue }
                        let d = dx + plane * S, xs = x + plane * S
                        for i in 0..<S {
                            var sum: Float = 0
                            for c in lo...hi { sum += t[(n * C + c) * S + i] }
                            d[i] += factor * xs[i] * sum
                        }
                    }
                }
            }
        case let .l2Normalize(eps):
            let m = g.inputShape.itemCount
            parallelChunks(g.batch, grain: spatialGrain(m)) { range in
                for n in range {
                    let xs = x + n * m, d = dy + n * m, out = dx + n * m
                    var sum = 0.0, dot = 0.0
                    for i in 0..<m { sum += Double(xs[i]) * Double(xs[i]); dot += Double(d[i]) * Double(xs[i]) }
                    let r = 1 / (sum + Double(eps)).squareRoot()
                    let (rf, k) = (Float(r), Float(r * r * r * dot))
                    for i in 0..<m { out[i] = rf * d[i] - k * xs[i] }
                }
            }
        case let .instanceNormalization(eps):
            let S = H * W
            parallelChunks(planes, grain: spatialGrain(S)) { range in
                for plane in range {
                    let xs = x + plane * S, d = dy + plane * S, out = dx + plane * S
                    let (mean, inv) = planeStatistics(xs, S, eps)
                    var sumDy = 0.0, sumDyXhat = 0.0
                    for i in 0..<S {
                        sumDy += Double(d[i])
                        sumDyXhat += Double(d[i]) * Double((xs[i] - mean) * inv)
                    }
                    let meanDy = Float(sumDy / Double(S)), meanDyXhat = Float(sumDyXhat / Double(S))
                    for i in 0..<S { out[i] = inv * (d[i] - meanDy - (xs[i] - mean) * inv * meanDyXhat) }
                }
            }
        }
    }
}

/// sums[i] = sum over the window of channel (plane % C) of x², for every position i of the plane.
private func lrnSums(_ x: UnsafeMutablePointer<Float>, plane: Int, channels C: Int, spatial S: Int, _ l: LRNSpec,
                     into sums: inout [Float]) {
    let (n, c) = (plane / C, plane % C)
    for i in 0..<S { sums[i] = 0 }
    let lo = max(0, c - l.before), hi = min(C, c - l.before + l.localSize)
    for j in lo..<max(lo, hi) {
        let xs = x + (n * C + j) * S
        for i in 0..<S { sums[i] += xs[i] * xs[i] }
    }
}

/// Mean and 1 / sqrt(biased variance + eps) of `count` values, summed in Double.
private func planeStatistics(_ x: UnsafeMutablePointer<Float>, _ count: Int, _ eps: Float) -> (mean: Float, inv: Float) {
    var sum = 0.0
    for i in 0..<count { sum += Double(x[i]) }
    let mean = sum / Double(max(count, 1))
    var variance = 0.0
    for i in 0..<count { let d = Double(x[i]) - mean; variance += d * d }
    variance /= Double(max(count, 1))
    return (Float(mean), Float(1 / (variance + Double(eps)).squareRoot()))
}
