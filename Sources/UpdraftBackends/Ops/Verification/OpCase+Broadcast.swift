// Broadcasting binary ops and reductions in the verification tools: case rows, finite-difference
// problems and backend comparisons (the backward of a broadcasting op through
// `Backend.broadcastBinaryBackward`, as the executor runs it).
import UpdraftCore

extension OpCase {
    static func broadcast(_ op: BinaryOp, _ a: [Int], _ b: [Int]) -> OpCase {
        // The lists hold only shapes that broadcast; a wrong one shows as a failed row naming it.
        let g = (try? BroadcastGeometry(op: op, a: a, b: b)) ?? BroadcastGeometry.invalid(op, a, b)
        return OpCase(.broadcast(g))
    }
    static func reduction(_ kind: ReductionKind, _ input: [Int], _ output: [Int], scale: Double = 1,
                          values: InputValues = .uniform) -> OpCase {
        OpCase(.reduction(ReductionGeometry(kind: kind, inputDims: input, outputDims: output, scale: scale)), values: values)
    }
    static func mean(_ input: [Int], _ output: [Int]) -> OpCase {
        OpCase(.reduction(.mean(inputDims: input, outputDims: output)))
    }
}

extension BroadcastGeometry {
    /// A geometry that fails every check (for a case list entry whose shapes do not broadcast).
    static func invalid(_ op: BinaryOp, _ a: [Int], _ b: [Int]) -> BroadcastGeometry {
        var g = try! BroadcastGeometry(op: op, a: [1], b: [1])
        g.aDims = a; g.bDims = b; g.outputDims = []
        return g
    }
}

extension Array where Element == OpCase {
    /// Squeeze-and-excitation's [N, C, 1, 1] over [N, C, H, W], both operands broadcast, ranks that
    /// differ (numpy's right alignment), every op; sums, means and a max over inner, outer and all axes.
    static var broadcastGradientCheck: [OpCase] {
        [
            .broadcast(.add, [3, 4, 2, 3], [1, 4, 1, 1]),
            .broadcast(.subtract, [2, 3, 1, 4], [2, 1, 5, 1]),
            .broadcast(.multiply, [1, 5, 3, 3], [1, 5, 1, 1]),
            .broadcast(.multiply, [4], [2, 3, 4]),
            .broadcast(.divide, [3, 2, 3], [3]),
            .reduction(.sum, [3, 4, 2, 3], [3, 1, 1, 3]),
            .mean([1, 5, 3, 3], [1, 5, 1, 1]),
            .reduction(.max, [2, 3, 4, 5], [2, 1, 4, 1]),
            .reduction(.sum, [2, 3, 2], [1, 1, 1], scale: -0.5),
        ] + reductionKindsGradientCheck
    }

    /// Every other kind of the reduction table over inner, outer and all axes; an index (argMax,
    /// argMin) has no gradient and is left to the backend comparisons.
    static var reductionKindsGradientCheck: [OpCase] {
        ReductionKind.allCases.filter { $0 != .sum && $0 != .max && $0.hasGradient }.flatMap { k -> [OpCase] in
            [.reduction(k, [3, 4, 2, 3], [3, 1, 1, 3]), .reduction(k, [2, 3, 4], [1, 1, 1]), .reduction(k, [2, 5], [2, 1])]
        }
    }

    /// Every other kind of the table, forward and (where it has one) backward against the reference.
    static var reductionKindsComparison: [OpCase] {
        ReductionKind.allCases.filter { $0 != .sum && $0 != .max }.flatMap { k -> [OpCase] in
            [.reduction(k, [3, 7, 5, 5], [3, 1, 5, 5]), .reduction(k, [2, 3, 1, 4, 5, 2], [2, 1, 1, 4, 1, 2]),
             .reduction(k, [3, 33, 7, 7], [3, 33, 1, 1])]
        }
    }

    static var broadcastQuick: [OpCase] {
        [
            .broadcast(.multiply, [3, 7, 5, 5], [3, 7, 1, 1]),
            .broadcast(.divide, [3, 7, 5, 5], [1, 7, 1, 5]),
            .mean([3, 7, 5, 5], [3, 7, 1, 1]),
            .reduction(.max, [3, 7, 5, 5], [3, 1, 5, 5]),
        ] + ReductionKind.allCases.filter { $0 != .sum && $0 != .max }.map { .reduction($0, [3, 7, 5, 5], [3, 1, 5, 5]) }
    }

    static var broadcastFull: [OpCase] {
        [
            .broadcast(.multiply, [3, 33, 7, 7], [3, 33, 1, 1]),
            .broadcast(.add, [1, 65, 1, 1], [1, 65, 31, 33]),
            .broadcast(.divide, [3, 1, 31, 33], [3, 7, 1, 1]),
            .broadcast(.subtract, [2, 1, 3, 1, 5, 1], [1, 4, 1, 2, 1, 3]),
            .broadcast(.multiply, [63], [3, 65, 63]),
            .broadcast(.add, [1], [1]),
            .mean([3, 65, 7, 7], [3, 65, 1, 1]),
            .reduction(.sum, [1, 7, 31, 33], [1, 1, 31, 1]),
            .reduction(.max, [3, 33, 7, 7], [3, 33, 1, 1], values: .coarse),  // ties: the first maximum
            .reduction(.max, [1, 7, 65, 63], [1, 7, 1, 63]),
            .reduction(.sum, [2, 3, 1, 4, 5, 2], [2, 1, 1, 4, 1, 2], scale: 0.25),
            .reduction(.sum, [3, 1000], [3, 1000]),
        ] + reductionKindsComparison
    }
}

/// A broadcasting binary op (forward, and both operands' gradients, as the executor runs them).
public struct BroadcastCase: VerifiedOp {
    public var geometry: BroadcastGeometry

    public var opName: String { "broadcast" }
    public var summary: String { "\(geometry.aDims) \(geometry.op.rawValue) \(geometry.bDims)" }

    public func gradientProblem(rng: inout SplitMix64) throws -> GradientCheck.Problem? {
        let g = geometry
        let a = GradientCheck.uniform(g.aCount, -1...1, &rng)
        // a divisor stays away from zero
        let b = g.op == .divide ? GradientCheck.awayFromZero(g.bCount, &rng).map { $0 + ($0 < 0 ? -0.5 : 0.5) }
                                : GradientCheck.uniform(g.bCount, -1...1, &rng)
        return GradientCheck.Problem(inputs: [GradientCheck.Input("a", a), GradientCheck.Input("b", b)], forward: { v in
            try Reference.broadcastBinary(g, v[0], v[1])
        }, backward: { v, dy in
            let (da, db) = try Reference.broadcastBinaryBackward(g, v[0], v[1], outputGradient: dy)
            return [da, db]
        })
    }

    public func compare(in s: inout ComparisonSession) throws {
        let g = geometry, backend = s.backend
        let a = s.values(g.aCount)
        let b = g.op == .divide ? s.values(g.bCount).map { $0 + ($0 < 0 ? -0.5 : 0.5) } : s.values(g.bCount)
        let dy = s.values(g.outputCount)
        let ab = try s.upload(a), bb = try s.upload(b), y = try s.output(g.outputCount)
        try backend.broadcastBinary(g, ab, bb, output: y)
        let yRef = try Reference.broadcastBinary(g, asDouble(a), asDouble(b))
        try s.record("y", y, yRef)

        let da = try s.output(g.aCount), db = try s.output(g.bCount)
        try backend.broadcastBinaryBackward(g, a: ab, b: bb, output: try s.upload(asFloat(yRef)), outputGradient: try s.upload(dy),
                                            aGradient: da, bGradient: db, makeScratch: { try backend.makeBuffer(count: $0) })
        let (daRef, dbRef) = try Reference.broadcastBinaryBackward(g, asDouble(a), asDouble(b), outputGradient: asDouble(dy))
        try s.record("da", da, daRef)
        try s.record("db", db, dbRef)
    }
}

/// A reduction to a shape (forward and, where the kind has one, backward).
public struct ReductionCase: VerifiedOp {
    public var geometry: ReductionGeometry

    public var opName: String { "reduce" }
    /// The Core ML layer name ("reduceL1", "reduceArgMax", …), which `--op` also matches.
    public var variantName: String? {
        "reduce" + geometry.kind.rawValue.prefix(1).uppercased() + geometry.kind.rawValue.dropFirst()
    }
    public var summary: String {
        let g = geometry
        let kind = g.kind != .sum ? g.kind.rawValue : (g.scale == 1 ? "sum" : g.scale == -1 ? "-sum" : "sum x\(g.scale)")
        return "\(kind) \(g.inputDims) → \(g.outputDims)"
    }

    public func gradientProblem(rng: inout SplitMix64) throws -> GradientCheck.Problem? {
        let g = geometry
        try g.validate()
        guard g.kind.hasGradient else { return nil }
        let x: [Double]
        switch g.kind.checkDomain {
        case .signed: x = GradientCheck.uniform(g.inputCount, -1...1, &rng)
        case .distinct: x = GradientCheck.distinct(g.inputCount, &rng)
        case .positive: x = GradientCheck.uniform(g.inputCount, 0.5...1.5, &rng)
        case .awayFromZero: x = GradientCheck.awayFromZero(g.inputCount, &rng)
        case .nearUnit: x = GradientCheck.awayFromZero(g.inputCount, &rng).map { $0 + ($0 < 0 ? -0.4 : 0.4) }
        }
        return GradientCheck.Problem(inputs: [GradientCheck.Input("x", x)], forward: { v in try Reference.reduce(g, input: v[0]) },
                                     backward: { v, dy in [try Reference.reduceBackward(g, input: v[0], outputGradient: dy)] })
    }

    public func compare(in s: inout ComparisonSession) throws {
        let g = geometry
        let x: [Float]
        switch g.kind.checkDomain {
        case .signed, .distinct: x = s.values(g.inputCount)
        case .positive: x = s.values(g.inputCount, 0.5...1.5)
        case .awayFromZero, .nearUnit:
            let lift: Float = g.kind.checkDomain == .nearUnit ? 0.5 : 0.1
            x = s.values(g.inputCount).map { $0 + ($0 < 0 ? -lift : lift) }
        }
        let dy = s.values(g.outputCount)
        let xb = try s.upload(x), y = try s.output(g.outputCount)
        try s.backend.reduce(g, input: xb, output: y)
        try s.record("y", y, try Reference.reduce(g, input: asDouble(x)))
        guard g.kind.hasGradient else { return }
        let dx = try s.output(g.inputCount)
        try s.backend.reduceBackward(g, input: xb, outputGradient: try s.upload(dy), inputGradient: dx)
        try s.record("dx", dx, try Reference.reduceBackward(g, input: asDouble(x), outputGradient: asDouble(dy)))
    }
}

extension VerifiedOp where Self == BroadcastCase {
    public static func broadcast(_ g: BroadcastGeometry) -> BroadcastCase { BroadcastCase(geometry: g) }
}

extension VerifiedOp where Self == ReductionCase {
    public static func reduction(_ g: ReductionGeometry) -> ReductionCase { ReductionCase(geometry: g) }
}
