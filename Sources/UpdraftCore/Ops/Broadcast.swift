/// Broadcasting binary ops (add, subtract, multiply, divide with numpy's rules). A broadcasting op's
/// backward is a reduction (Reduce.swift): each operand's gradient sums dy (times the other operand's
/// factor) over the axes it was broadcast along.
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

/// Element-wise binary ops (Core ML's add and multiply layers, two inputs of the same shape).
public enum ElementwiseOp: Hashable, Sendable { case add, multiply }
