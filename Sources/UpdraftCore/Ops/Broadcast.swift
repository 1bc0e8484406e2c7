/// Broadcasting binary ops (add, subtract, multiply, divide with numpy's rules) and reductions to a
/// shape (sum, mean, max over any set of axes). A broadcasting op's backward is a reduction: each
/// operand's gradient sums dy (times the other operand's factor) over the axes it was broadcast
/// along, so the two geometries are one family.
///
/// Shapes are full, batch included, row-major, of rank 1...6: an operand's dimension is the
/// output's or 1 (broadcast). `BroadcastGeometry(op:a:b:)` applies numpy's right-aligned rule to
/// shapes of different ranks.

/// Element-wise arithmetic of a broadcasting layer.
public enum BinaryOp: String, Hashable, Sendable, CaseIterable {
    /// a + b, a - b, a * b and a / b, as Core ML's add/subtract/multiply/divideBroadcastable layers.
    case add, subtract, multiply, divide
}

/// y = a op b over `outputDims`, a and b broadcast to it.
public struct BroadcastGeometry: Hashable, Sendable {
    /// The highest rank the kernels take (batch included); `init(op:a:b:)` and `ReductionGeometry.validate()` reject more.
    public static let maxRank = 6
    /// The arithmetic applied to each pair of broadcast elements.
    public var op: BinaryOp
    /// The output's dimensions, row-major: per axis, the larger of the operands' dimensions.
    public var outputDims: [Int]
    /// The operands' dimensions, of the output's rank: each equals the output's or 1.
    public var aDims: [Int]
    /// The second operand's dimensions, of the output's rank: each equals the output's or 1.
    public var bDims: [Int]

    /// numpy broadcasting: ranks aligned on the right (missing leading dimensions are 1), each pair
    /// of dimensions equal or one of them 1.
    public init(op: BinaryOp, a: [Int], b: [Int]) throws {
        let rank = max(a.count, b.count)
        guard rank >= 1, rank <= Self.maxRank else {
            throw UpdraftError(.unsupported, "broadcasting \(op.rawValue) of shapes \(a) and \(b): rank \(rank) is outside 1...\(Self.maxRank)")
        }
        let pa = [Int](repeating: 1, count: rank - a.count) + a, pb = [Int](repeating: 1, count: rank - b.count) + b
        var out: [Int] = []
        for (x, y) in zip(pa, pb) {
            guard x >= 0, y >= 0, x == y || x == 1 || y == 1 else {
                throw UpdraftError(.invalidArgument, "shapes \(a) and \(b) do not broadcast (numpy's rule: each pair of dimensions equal or one of them 1)")
            }
            out.append(x == 1 ? y : x)
        }
        self.op = op; outputDims = out; aDims = pa; bDims = pb
    }

    /// Elements of the output.
    public var outputCount: Int { outputDims.reduce(1, *) }
    /// Elements of the first operand, as stored (before broadcasting).
    public var aCount: Int { aDims.reduce(1, *) }
    /// Elements of the second operand, as stored (before broadcasting).
    public var bCount: Int { bDims.reduce(1, *) }

    /// Row-major strides of `dims` with 0 where the dimension is broadcast (1 against a larger output).
    package func strides(_ dims: [Int]) -> [Int] {
        var s = [Int](repeating: 0, count: dims.count), step = 1
        for i in stride(from: dims.count - 1, through: 0, by: -1) {
            s[i] = dims[i] == 1 && outputDims[i] != 1 ? 0 : step
            step *= dims[i]
        }
        return s
    }

    /// The reduction taking a gradient of the output's shape to operand `dims` (`scale` times the sum).
    public func gradientReduction(to dims: [Int], scale: Double = 1) -> ReductionGeometry {
        ReductionGeometry(kind: .sum, inputDims: outputDims, outputDims: dims, scale: scale)
    }

    /// Forward pass: one flop per output element; reads both operands once, writes the output.
    public var cost: OpCost {
        OpCost(flops: Double(outputCount), bytes: f32Bytes(aCount, bCount, outputCount))
    }
}

/// How a reduction combines the values it reduces.
public enum ReductionKind: String, Hashable, Sendable { case sum, max }

/// y [outputDims] from x [inputDims] (same rank, each output dimension equal to the input's or 1):
/// `scale` times the sum (a mean is a sum with scale 1 / count), or the maximum, over every input
/// element that maps to the output element. Max's backward routes dy to the first maximum in
/// row-major order.
public struct ReductionGeometry: Hashable, Sendable {
    /// Sum (scaled by `scale`) or maximum.
    public var kind: ReductionKind
    /// The input's dimensions, row-major, batch included.
    public var inputDims: [Int]
    /// The output's dimensions, of the input's rank: the input's on kept axes, 1 on reduced axes.
    public var outputDims: [Int]
    /// Factor applied to a sum (1 / reduced count for a mean; 1 by default); ignored by max.
    public var scale: Double

    /// A reduction of `inputDims` to `outputDims`; unchecked until `validate()`. `scale` defaults to 1 (a plain sum).
    public init(kind: ReductionKind, inputDims: [Int], outputDims: [Int], scale: Double = 1) {
        self.kind = kind; self.inputDims = inputDims; self.outputDims = outputDims; self.scale = scale
    }

    /// A mean over the axes where `outputDims` is 1 and `inputDims` is not.
    public static func mean(inputDims: [Int], outputDims: [Int]) -> ReductionGeometry {
        let reduced = zip(inputDims, outputDims).reduce(1) { $0 * ($1.1 == 1 ? $1.0 : 1) }
        return ReductionGeometry(kind: .sum, inputDims: inputDims, outputDims: outputDims, scale: 1 / Double(max(reduced, 1)))
    }

    /// Elements of the input.
    public var inputCount: Int { inputDims.reduce(1, *) }
    /// Elements of the output.
    public var outputCount: Int { outputDims.reduce(1, *) }

    /// Throws `UpdraftError` (`.invalidArgument`) unless the ranks match and are 1...`BroadcastGeometry.maxRank`, every output dimension is the input's or 1, and a max reduces no empty axis.
    public func validate() throws {
        guard inputDims.count == outputDims.count, inputDims.count >= 1, inputDims.count <= BroadcastGeometry.maxRank else {
            throw UpdraftError(.invalidArgument, "reduction of \(inputDims) to \(outputDims): ranks must match and be 1...\(BroadcastGeometry.maxRank)")
        }
        for (i, o) in zip(inputDims, outputDims) where i < 0 || !(o == i || o == 1) {
            throw UpdraftError(.invalidArgument, "reduction of \(inputDims) to \(outputDims): each output dimension must be the input's or 1")
        }
        if kind == .max, zip(inputDims, outputDims).contains(where: { $0.0 == 0 && $0.1 == 1 }) {
            throw UpdraftError(.invalidArgument, "max reduction of \(inputDims) over an empty axis has no value")
        }
    }

    /// The reduced and kept axes merged into runs (adjacent axes of the same kind), as the kernels
    /// take them: up to three kept runs (sizes, input strides) and three reduced runs.
    package var runs: (kept: [(size: Int, stride: Int)], reduced: [(size: Int, stride: Int)]) {
        var kept: [(Int, Int)] = [], reduced: [(Int, Int)] = []
        var step = 1
        var lastWasReduced: Bool? = nil
        for i in stride(from: inputDims.count - 1, through: 0, by: -1) {
            let size = inputDims[i]
            if size == 1 { continue }  // a dimension of 1 adds nothing to either side
            let isReduced = outputDims[i] == 1
            if lastWasReduced == isReduced {
                if isReduced { reduced[reduced.count - 1].0 *= size } else { kept[kept.count - 1].0 *= size }
            } else if isReduced {
                reduced.append((size, step))
            } else {
                kept.append((size, step))
            }
            lastWasReduced = isReduced
            step *= size
        }
        return (kept.reversed().map { (size: $0.0, stride: $0.1) }, reduced.reversed().map { (size: $0.0, stride: $0.1) })
    }

    /// One flop per input element; reads the input once, writes the output.
    public var cost: OpCost { OpCost(flops: Double(inputCount), bytes: f32Bytes(inputCount, outputCount)) }
}

/// Element-wise binary ops (Core ML's add and multiply layers, two inputs of the same shape).
public enum ElementwiseOp: Hashable, Sendable { case add, multiply }
