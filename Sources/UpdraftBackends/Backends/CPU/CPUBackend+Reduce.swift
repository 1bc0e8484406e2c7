// Reductions on the CPU, in float32: one output element per work item walking its group (up to three
// runs of reduced axes, `ReductionGeometry.runs`), so no two threads write one element. Each kind is
// one row of `groupValue` (forward) and `groupGradient` (backward), built from the walk's primitives:
// a sum of a mapped value, and the first extremum.
import Foundation
import UpdraftCore

extension CPUBackend {
    /// y[j] = scale * the kind's value over group j.
    public func reduce(_ g: ReductionGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try g.validate()
        let x = try pointer(input, g.inputCount, "reduction input \(g.inputDims)")
        let y = try pointer(output, g.outputCount, "reduction output \(g.outputDims)")
        let offset = Float(g.offset)
        forEachReductionGroup(g) { j, base, walk, scale in
            y[j] = scale * walk.groupValue(g.kind, x + base, offset: offset)
        }
    }

    /// dx = scale * dy[j] times the kind's derivative over group j (max: dy at the first maximum only).
    public func reduceBackward(_ g: ReductionGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                               inputGradient: DeviceBuffer) throws {
        try g.validate()
        try g.requireGradient()
        let x = try pointer(input, g.inputCount, "reduction input \(g.inputDims)")
        let dy = try pointer(outputGradient, g.outputCount, "reduction output gradient \(g.outputDims)")
        let dx = try pointer(inputGradient, g.inputCount, "reduction input gradient \(g.inputDims)")
        let offset = Float(g.offset)
        forEachReductionGroup(g) { j, base, walk, scale in
            walk.groupGradient(g.kind, x + base, dx + base, scale * dy[j], offset: offset)
        }
    }

    /// Both directions' walk: output element `j`, its group's first input element `base`, the group's
    /// offsets and the scale, the output elements split across the workers.
    private func forEachReductionGroup(_ g: ReductionGeometry,
                                       _ body: (_ j: Int, _ base: Int, _ walk: ReductionWalk, _ scale: Float) -> Void) {
        let walk = ReductionWalk(g)
        let scale = Float(g.scale)
        parallelChunks(g.outputCount, grain: max(1, CPUParallel.elementGrain / max(walk.groupSize, 1))) { range in
            for j in range { body(j, walk.base(j), walk, scale) }
        }
    }
}

/// Offsets of one reduction: output element j's first input element (`base`) and the offsets of its
/// group relative to it, row-major over the reduced runs.
struct ReductionWalk {
    let kept: [(size: Int, stride: Int)]
    let reduced: [(size: Int, stride: Int)]
    let groupSize: Int

    init(_ g: ReductionGeometry) {
        let r = g.runs
        kept = r.kept; reduced = r.reduced
        groupSize = reduced.reduce(1) { $0 * $1.size }
    }

    func base(_ j: Int) -> Int {
        var rest = j, offset = 0
        for run in kept.reversed() { offset += (rest % run.size) * run.stride; rest /= run.size }
        return offset
    }

    /// Calls `body` with every offset of the group, in row-major order.
    func forEach(_ body: (Int) -> Void) {
        func level(_ k: Int, _ offset: Int) {
            if k == reduced.count { body(offset); return }
            for i in 0..<reduced[k].size { level(k + 1, offset + i * reduced[k].stride) }
        }
        level(0, 0)
    }

    /// The sum of `f` over the group.
    func sum(_ x: UnsafeMutablePointer<Float>, _ f: (Float) -> Float) -> Float {
        var s: Float = 0
        forEach { s += f(x[$0]) }
        return s
    }

    /// The offset and the position (row-major) of the group's first element that no later one beats
    /// (`better(later, best)`: a strict comparison keeps the first of ties).
    func firstExtremum(_ x: UnsafeMutablePointer<Float>, _ better: (Float, Float) -> Bool) -> (offset: Int, position: Int) {
        var best = 0, position = 0, value = x[0], i = 0
        forEach { o in
            if i > 0, better(x[o], value) { value = x[o]; best = o; position = i }
            i += 1
        }
        return (best, position)
    }

    /// The kind's value over the group whose first element is `x`, before the scale.
    func groupValue(_ kind: ReductionKind, _ x: UnsafeMutablePointer<Float>, offset: Float) -> Float {
        switch kind {
        case .sum: return sum(x) { $0 }
        case .max: return x[firstExtremum(x, >).offset]
        case .min: return x[firstExtremum(x, <).offset]
        case .prod:
            var p: Float = 1
            forEach { p *= x[$0] }
            return p
        case .l1: return sum(x) { abs($0) }
        case .l2: return sum(x) { $0 * $0 }.squareRoot()
        case .sumSquare: return sum(x) { $0 * $0 }
        case .logSum: return Foundation.log(sum(x) { $0 } + offset)
        case .logSumExp:
            let m = x[firstExtremum(x, >).offset]
            return m + Foundation.log(sum(x) { Foundation.exp($0 - m) })
        case .argMax: return Float(firstExtremum(x, >).position)
        case .argMin: return Float(firstExtremum(x, <).position)
        }
    }

    /// Writes `v` (scale * dy) times the kind's derivative into every element of the group whose
    /// input starts at `x` and gradient at `dx`.
    func groupGradient(_ kind: ReductionKind, _ x: UnsafeMutablePointer<Float>, _ dx: UnsafeMutablePointer<Float>, _ v: Float,
                       offset: Float) {
        switch kind {
        case .sum: forEach { dx[$0] = v }
        case .max:
            forEach { dx[$0] = 0 }
            dx[firstExtremum(x, >).offset] = v
        case .min:
            forEach { dx[$0] = 0 }
            dx[firstExtremum(x, <).offset] = v
        case .prod:  // the product of the others, from the non-zero product and the count of zeros
            var zeros = 0, p: Float = 1
            forEach { o in if x[o] == 0 { zeros += 1 } else { p *= x[o] } }
            forEach { o in dx[o] = zeros == 0 ? v * p / x[o] : (zeros == 1 && x[o] == 0 ? v * p : 0) }
        case .l1: forEach { o in dx[o] = x[o] > 0 ? v : (x[o] < 0 ? -v : 0) }
        case .l2:
            let norm = sum(x) { $0 * $0 }.squareRoot()
            forEach { o in dx[o] = norm > 0 ? v * x[o] / norm : 0 }
        case .sumSquare: forEach { o in dx[o] = 2 * v * x[o] }
        case .logSum:
            let q = v / (sum(x) { $0 } + offset)
            forEach { dx[$0] = q }
        case .logSumExp:
            let y = groupValue(.logSumExp, x, offset: offset)
            forEach { o in dx[o] = v * Foundation.exp(x[o] - y) }
        case .argMax, .argMin: break  // no gradient: the callers refuse (ReductionGeometry.requireGradient)
        }
    }
}
