import Foundation

/// Reductions to a shape over any set of axes: the table of reduction kinds (each kind's Double
/// reference on one group of values, forward and derivative), the Core ML layers and reduce modes
/// that name them (`ReduceMode`), and the geometry the backends run (`ReductionGeometry`).
///
/// Adding a kind: a `ReductionKind` case with its rows below (value, derivative, the inputs a check
/// draws), a `ReduceMode` row naming its Core ML layer and ReduceLayerParams code, and its case in the
/// CPU backend (CPUBackend+Reduce.swift) and in Kernels/reduce.cl (`REDUCE_KIND`). The layer decoder,
/// shape rule, executor, gradcheck rows and backend comparisons read the table.

/// How a reduction combines the values of one group (the input elements of one output element).
public enum ReductionKind: String, Hashable, Sendable, CaseIterable {
    /// The sum (a mean is a sum scaled by 1 / count); the maximum (its gradient reaches the first maximum in row-major order).
    case sum, max
    /// The minimum (its gradient reaches the first minimum in row-major order).
    case min
    /// The product; its gradient is the product of the others (exact with zeros: only a lone zero's is non-zero).
    case prod
    /// The sum of |x| (gradient sign(x), 0 at 0).
    case l1
    /// The Euclidean norm sqrt(sum x²) (gradient x / norm, 0 where the norm is 0).
    case l2
    /// The sum of x² (gradient 2x).
    case sumSquare
    /// log(sum x + offset) (gradient 1 / (sum x + offset)); offset is the old reduce layer's epsilon.
    case logSum
    /// log(sum exp(x)), computed as m + log(sum exp(x - m)) with m the maximum (gradient exp(x - y), the softmax).
    case logSumExp
    /// The position of the first minimum in the group (row-major), as a float; no gradient.
    case argMin
    /// The position of the first maximum in the group (row-major), as a float; no gradient.
    case argMax
}

/// The values a check draws for a kind: away from the points where its derivative jumps or its value is undefined.
public enum ReductionInputDomain: Hashable, Sendable {
    /// Uniform in -1...1.
    case signed
    /// All different by at least 1e-3 (no tie for a maximum or minimum within a finite-difference step).
    case distinct
    /// Uniform in 0.5...1.5 (a log of the sum stays defined).
    case positive
    /// |x| in 0.1...1, either sign (no kink of |x| within reach).
    case awayFromZero
    /// |x| in 0.5...1.5, either sign (a product of many stays of order one).
    case nearUnit
}

extension ReductionKind {
    /// The kind's value on one group (its elements in row-major order), before the geometry's scale.
    /// `offset` is the geometry's `offset` (added inside the log of logSum).
    public func referenceValue(_ x: [Double], offset: Double) -> Double {
        switch self {
        case .sum: return x.reduce(0, +)
        case .max: return x[Self.firstExtremum(x, >)]
        case .min: return x[Self.firstExtremum(x, <)]
        case .prod: return x.reduce(1, *)
        case .l1: return x.reduce(0) { $0 + abs($1) }
        case .l2: return x.reduce(0) { $0 + $1 * $1 }.squareRoot()
        case .sumSquare: return x.reduce(0) { $0 + $1 * $1 }
        case .logSum: return Foundation.log(x.reduce(0, +) + offset)
        case .logSumExp:
            let m = x[Self.firstExtremum(x, >)]
            return m + Foundation.log(x.reduce(0) { $0 + Foundation.exp($1 - m) })
        case .argMax: return Double(Self.firstExtremum(x, >))
        case .argMin: return Double(Self.firstExtremum(x, <))
        }
    }

    /// dy / dx for each element of one group, `y` its `referenceValue`; nil for a kind without a gradient.
    public func referenceDerivative(_ x: [Double], y: Double, offset: Double) -> [Double]? {
        switch self {
        case .sum: return [Double](repeating: 1, count: x.count)
        case .max: return Self.indicator(x.count, Self.firstExtremum(x, >))
        case .min: return Self.indicator(x.count, Self.firstExtremum(x, <))
        case .prod:  // the product of the others, from the non-zero product and the count of zeros
            let zeros = x.filter { $0 == 0 }.count, others = x.filter { $0 != 0 }.reduce(1, *)
            return x.map { zeros == 0 ? others / $0 : (zeros == 1 && $0 == 0 ? others : 0) }
        case .l1: return x.map { $0 > 0 ? 1 : ($0 < 0 ? -1 : 0) }
        case .l2: return x.map { y > 0 ? $0 / y : 0 }
        case .sumSquare: return x.map { 2 * $0 }
        case .logSum: return [Double](repeating: 1 / (x.reduce(0, +) + offset), count: x.count)
        case .logSumExp: return x.map { Foundation.exp($0 - y) }
        case .argMax, .argMin: return nil
        }
    }

    /// The kind's value is a position in the group (argMax, argMin), written as a float.
    public var isIndex: Bool { self == .argMax || self == .argMin }

    /// Whether a gradient flows back through the kind (an index has none).
    public var hasGradient: Bool { !isIndex }

    /// Whether the kind needs at least one element per group (a maximum of nothing has no value).
    public var needsElements: Bool { [.max, .min, .logSumExp, .argMax, .argMin].contains(self) }

    /// The values a gradient or backend check draws for this kind.
    public var checkDomain: ReductionInputDomain {
        switch self {
        case .sum, .l2, .sumSquare, .logSumExp: return .signed
        case .max, .min, .argMax, .argMin: return .distinct
        case .logSum: return .positive
        case .l1: return .awayFromZero
        case .prod: return .nearUnit
        }
    }

    /// The position of the group's first element that no later one beats (`better(later, best)`).
    public static func firstExtremum(_ x: [Double], _ better: (Double, Double) -> Bool) -> Int {
        var best = 0
        for i in x.indices.dropFirst() where better(x[i], x[best]) { best = i }
        return best
    }

    static func indicator(_ count: Int, _ at: Int) -> [Double] {
        var d = [Double](repeating: 0, count: count)
        d[at] = 1
        return d
    }
}

/// A reduction as Core ML layers name it: the ND layer (reduceSum, ..., argMax) and, where one exists,
/// the old reduce layer's ReduceLayerParams mode, onto a `ReductionKind` (mean: a scaled sum).
public enum ReduceMode: String, Hashable, Sendable, CaseIterable {
    /// reduceSum, reduceMean and reduceMax; the raw value is the NeuralNetworkLayer field name.
    case sum = "reduceSum", mean = "reduceMean", max = "reduceMax"
    /// reduceMin.
    case min = "reduceMin"
    /// reduceProd.
    case prod = "reduceProd"
    /// reduceL1.
    case l1 = "reduceL1"
    /// reduceL2.
    case l2 = "reduceL2"
    /// reduceSumSquare.
    case sumSquare = "reduceSumSquare"
    /// reduceLogSum.
    case logSum = "reduceLogSum"
    /// reduceLogSumExp.
    case logSumExp = "reduceLogSumExp"
    /// argMax and argMin (ArgMaxLayerParams / ArgMinLayerParams: one axis, removeDim); forward only.
    case argMax = "argMax", argMin = "argMin"

    /// (the kind it runs, the NeuralNetworkLayer field of its ND layer, the ReduceLayerParams mode code or nil).
    private var row: (kind: ReductionKind, field: Int, reduceLayerMode: Int32?) {
        switch self {
        case .sum: return (.sum, 1270, 0)
        case .mean: return (.sum, 1280, 1)
        case .max: return (.max, 1260, 7)
        case .min: return (.min, 1265, 8)
        case .prod: return (.prod, 1275, 2)
        case .l1: return (.l1, 1250, 5)
        case .l2: return (.l2, 1255, 6)
        case .sumSquare: return (.sumSquare, 1290, 4)
        case .logSum: return (.logSum, 1285, 3)
        case .logSumExp: return (.logSumExp, 1295, nil)
        case .argMax: return (.argMax, 1025, 9)
        case .argMin: return (.argMin, 1020, nil)
        }
    }

    /// The kind the backends run.
    public var kind: ReductionKind { row.kind }
    /// The NeuralNetworkLayer oneof field of the ND layer.
    public var layerField: Int { row.field }
    /// The ReduceLayerParams (old reduce layer) mode code, or nil when that layer has no such mode.
    public var reduceLayerMode: Int32? { row.reduceLayerMode }
    /// A mean: the sum scaled by 1 / the reduced count.
    public var isMean: Bool { self == .mean }
    /// The ND layer reads ArgMaxLayerParams / ArgMinLayerParams (axis, removeDim) rather than axes, keepDims, reduceAll.
    public var isArgument: Bool { self == .argMax || self == .argMin }

    /// The mode of a ReduceLayerParams code, or nil when Updraft does not run it.
    public static func reduceLayer(mode code: Int32) -> ReduceMode? { allCases.first { $0.reduceLayerMode == code } }
}

/// A reduction layer as the graph holds it: the mode, the per-example shapes in and out (1 on the
/// reduced axes) and the offset logSum adds inside its log (the old reduce layer's epsilon).
public struct ReductionSpec: Hashable, Sendable {
    /// The Core ML mode (its kind, and whether a sum is a mean).
    public var mode: ReduceMode
    /// The per-example input shape.
    public var input: [Int]
    /// The per-example output shape, of the input's rank: the input's on kept axes, 1 on reduced ones.
    public var output: [Int]
    /// Added to the sum inside logSum's log; 0 elsewhere.
    public var offset: Double

    /// A reduction of `input` to `output` by `mode`.
    public init(mode: ReduceMode, input: [Int], output: [Int], offset: Double = 0) {
        self.mode = mode; self.input = input; self.output = output; self.offset = offset
    }

    /// The reduction over `[batch] + input` to `[batch] + output`, validated (a mean scales by 1 / the reduced count).
    public func geometry(batch: Int) throws -> ReductionGeometry {
        var g = mode.isMean ? ReductionGeometry.mean(inputDims: [batch] + input, outputDims: [batch] + output)
                            : ReductionGeometry(kind: mode.kind, inputDims: [batch] + input, outputDims: [batch] + output)
        g.offset = offset
        try g.validate()
        return g
    }
}

/// y [outputDims] from x [inputDims] (same rank, each output dimension equal to the input's or 1):
/// `scale` times the kind's value over every input element that maps to the output element.
public struct ReductionGeometry: Hashable, Sendable {
    /// How each group's values combine.
    public var kind: ReductionKind
    /// The input's dimensions, row-major, batch included.
    public var inputDims: [Int]
    /// The output's dimensions, of the input's rank: the input's on kept axes, 1 on reduced axes.
    public var outputDims: [Int]
    /// Factor applied to each group's value (1 / reduced count for a mean; 1 by default).
    public var scale: Double
    /// Added to the sum inside logSum's log; ignored by the other kinds.
    public var offset: Double

    /// A reduction of `inputDims` to `outputDims`; unchecked until `validate()`. `scale` defaults to 1 (a plain sum).
    public init(kind: ReductionKind, inputDims: [Int], outputDims: [Int], scale: Double = 1, offset: Double = 0) {
        self.kind = kind; self.inputDims = inputDims; self.outputDims = outputDims; self.scale = scale; self.offset = offset
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
    /// Elements of one group (the product of the reduced dimensions).
    public var groupCount: Int { zip(inputDims, outputDims).reduce(1) { $0 * ($1.1 == 1 ? $1.0 : 1) } }

    /// Throws `UpdraftError` (`.invalidArgument`) unless the ranks match and are 1...`BroadcastGeometry.maxRank`, every output
    /// dimension is the input's or 1, and a kind that needs elements (max, ...) reduces no empty axis.
    public func validate() throws {
        guard inputDims.count == outputDims.count, inputDims.count >= 1, inputDims.count <= BroadcastGeometry.maxRank else {
            throw UpdraftError(.invalidArgument, "reduction of \(inputDims) to \(outputDims): ranks must match and be 1...\(BroadcastGeometry.maxRank)")
        }
        for (i, o) in zip(inputDims, outputDims) where i < 0 || !(o == i || o == 1) {
            throw UpdraftError(.invalidArgument, "reduction of \(inputDims) to \(outputDims): each output dimension must be the input's or 1")
        }
        if kind.needsElements, zip(inputDims, outputDims).contains(where: { $0.0 == 0 && $0.1 == 1 }) {
            throw UpdraftError(.invalidArgument, "\(kind.rawValue) reduction of \(inputDims) over an empty axis has no value")
        }
    }

    /// Throws `UpdraftError` (`.unsupported`) when the kind has no gradient (an index), naming it.
    public func requireGradient() throws {
        guard kind.hasGradient else {
            throw UpdraftError(.unsupported, "\(kind.rawValue) reduction has no gradient",
                               hint: "an index output is not differentiable: train only layers after it, or remove it from the trained path")
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
