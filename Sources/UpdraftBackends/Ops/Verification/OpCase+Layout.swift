// The layout ops in the verification tools. A `LayoutCase` checks the op's definition
// (Reference.layoutForward / layoutBackward) against finite differences, and a backend's
// composition of it (Backend.layoutForward / layoutBackward: strided copies for the ops that move
// values) against that definition, so the copies' geometry is what a comparison tests. softmaxND
// rows use the softmax kind on (outer, axis, inner) geometries. A new layout op adds its rows to the
// lists below; the problem and the comparison need nothing new.
import UpdraftCore

/// A layout op on `batch` examples (transpose, concatND, …): the backend's composition
/// (`Backend.layoutForward` / `layoutBackward`) against the op's definition.
public struct LayoutCase: VerifiedOp {
    public var op: LayoutOp
    public var batch: Int

    public var opName: String { op.name }
    public var summary: String { "n\(batch) \(op)" }

    /// The op's inputs drawn in -1...1 ("x", or "x0", "x1", … for several), its forward and backward from the reference.
    public func gradientProblem(rng: inout SplitMix64) throws -> GradientCheck.Problem? {
        let (op, batch) = (self.op, self.batch)
        let counts = try OpCase.layoutCounts(op, batch: batch)
        var inputs: [GradientCheck.Input] = []
        for (i, count) in counts.inputs.enumerated() {
            inputs.append(GradientCheck.Input(counts.inputs.count == 1 ? "x" : "x\(i)", GradientCheck.uniform(count, -1...1, &rng)))
        }
        return GradientCheck.Problem(inputs: inputs,
                                     forward: { v in try Reference.layoutForward(op, batch: batch, inputs: v) },
                                     backward: { v, dy in try Reference.layoutBackward(op, batch: batch, inputs: v, outputGradient: dy) })
    }

    /// Forward ("y") and every input's gradient ("dx", or "dx0", "dx1", …), exact for copies. The
    /// gradient buffers start at the sentinel, so a copy that misses an element fails.
    public func compare(in s: inout ComparisonSession) throws {
        let counts = try OpCase.layoutCounts(op, batch: batch)
        var xs: [[Float]] = []
        for count in counts.inputs { xs.append(s.values(count)) }
        let dy = s.values(counts.output)
        var exact: Tolerance? = nil
        if case .copies = op.execution(batch: batch) { exact = .exact }
        let y = try s.output(counts.output)
        try s.backend.layoutForward(op, batch: batch, inputs: try xs.map(s.upload), output: y)
        let yRef = try Reference.layoutForward(op, batch: batch, inputs: xs.map(asDouble))
        try s.record("y", y, yRef, tolerance: exact)
        let dxs = try counts.inputs.map { try s.output($0) }
        try s.backend.layoutBackward(op, batch: batch, output: try s.upload(asFloat(yRef)), outputGradient: try s.upload(dy),
                                     inputGradients: dxs)
        let reference = try Reference.layoutBackward(op, batch: batch, inputs: xs.map(asDouble), outputGradient: asDouble(dy))
        for (i, dx) in dxs.enumerated() { try s.record(dxs.count == 1 ? "dx" : "dx\(i)", dx, reference[i], tolerance: exact) }
    }
}

extension VerifiedOp where Self == LayoutCase {
    public static func layout(_ op: LayoutOp, batch: Int) -> LayoutCase { LayoutCase(op: op, batch: batch) }
}

extension OpCase {
    /// The values of each input and of the output; an alias has none of its own to check.
    static func layoutCounts(_ op: LayoutOp, batch: Int) throws -> (inputs: [Int], output: Int) {
        guard let counts = op.counts(batch: batch) else {
            throw UpdraftError(.invalidArgument, "layout case \(op.name): an alias moves no values; there is nothing to check")
        }
        return counts
    }

    /// A transpose case: `batch` examples of `dims`, output axis i = input axis perm[i].
    public static func transpose(batch: Int, _ dims: [Int], perm: [Int]) -> OpCase {
        OpCase(.layout(.transpose(TransposeGeometry(batch: 1, dims: dims, perm: perm), kind: "transpose"), batch: batch),
               name: "n\(batch) \(dims) perm \(perm)")
    }

    /// softmaxND over `axis` of one example's `dims` (batch `batch`), as the executor runs it.
    public static func softmaxND(batch: Int, _ dims: [Int], axis: Int) -> OpCase {
        let g = SoftmaxGeometry(batch: batch * dims[..<axis].reduce(1, *), channels: dims[axis],
                                spatial: dims[(axis + 1)...].reduce(1, *))
        return OpCase(.softmax(g), name: "ND n\(batch) \(dims) axis \(axis) → [\(g.batch), \(g.channels), \(g.spatial)]")
    }

    /// concatND of inputs that differ only along `axis` (sizes `sizes`; `dims[axis]` is not read), as the
    /// executor runs it; with `interleave` (equal sizes) the inputs alternate along the axis.
    public static func concatND(batch: Int, _ dims: [Int], axis: Int, sizes: [Int], interleave: Bool = false) -> OpCase {
        let op = LayoutOp.concatND(outer: dims[..<axis].reduce(1, *), channels: sizes, inner: dims[(axis + 1)...].reduce(1, *),
                                   interleave: interleave)
        return OpCase(.layout(op, batch: batch), name: "n\(batch) \(dims) axis \(axis) sizes \(sizes)" + (interleave ? " interleave" : ""))
    }

    /// constantPad of `batch` examples of `dims`, `before[k]` / `after[k]` values of `value` on axis k.
    public static func constantPad(batch: Int, _ dims: [Int], before: [Int], after: [Int], value: Float) -> OpCase {
        OpCase(.layout(.constantPad(dims: dims, before: before, after: after, value: value), batch: batch),
               name: "n\(batch) \(dims) pad \(before)/\(after) value \(value)")
    }

    /// The layout cases of each list (appended to `.gradientCheck`, `.quick` and `.full`).
    static var layoutGradientCheck: [OpCase] {
        [.transpose(batch: 2, [3, 4], perm: [1, 0]),
         .transpose(batch: 1, [2, 3, 1, 4], perm: [3, 0, 2, 1]),
         .transpose(batch: 3, [2, 1, 3, 2, 2], perm: [0, 2, 1, 4, 3]),
         .softmaxND(batch: 2, [3, 4, 2], axis: 1),
         .concatND(batch: 2, [2, 3, 2], axis: 2, sizes: [2, 1, 3]),
         .concatND(batch: 3, [2, 3, 2], axis: 1, sizes: [1, 2]),
         .constantPad(batch: 2, [3, 4], before: [1, 0], after: [2, 1], value: 0.5),
         .constantPad(batch: 1, [2, 3, 2], before: [0, 2, 0], after: [0, 0, 0], value: 0),
         .constantPad(batch: 3, [5], before: [2], after: [1], value: -1),
         .concatND(batch: 2, [2, 3, 2], axis: 1, sizes: [3, 3], interleave: true),
         .concatND(batch: 1, [3, 2], axis: 0, sizes: [2, 2, 2], interleave: true)]
    }

    static var layoutQuick: [OpCase] {
        [.transpose(batch: 3, [7, 5, 3], perm: [2, 0, 1]),
         .softmaxND(batch: 3, [5, 7, 3], axis: 1),
         .concatND(batch: 3, [3, 5, 7], axis: 1, sizes: [2, 5]),
         .constantPad(batch: 3, [5, 7, 3], before: [1, 0, 2], after: [0, 3, 1], value: 0.25),
         .concatND(batch: 3, [3, 5, 7], axis: 2, sizes: [7, 7], interleave: true)]
    }

    static var layoutFull: [OpCase] {
        [.transpose(batch: 1, [1], perm: [0]),
         .transpose(batch: 3, [33, 65], perm: [1, 0]),
         .transpose(batch: 2, [7, 31, 33], perm: [0, 2, 1]),
         .transpose(batch: 1, [2, 3, 5, 7, 11], perm: [4, 2, 0, 3, 1]),
         .transpose(batch: 3, [2, 7, 1, 9, 4, 3, 5], perm: [6, 0, 5, 2, 1, 4, 3]),
         .transpose(batch: 2, [4, 6, 7, 7], perm: [1, 0, 2, 3]),   // channel shuffle [g, C/g, H, W]
         .transpose(batch: 1, [3, 65, 63], perm: [1, 2, 0]),       // CHW -> HWC
         .softmaxND(batch: 3, [7, 33, 5], axis: 1),
         .softmaxND(batch: 1, [65, 3], axis: 0),
         .softmaxND(batch: 2, [3, 5, 63], axis: 2),
         .concatND(batch: 3, [5, 7, 33], axis: 2, sizes: [1, 31, 33]),
         .concatND(batch: 1, [65, 3], axis: 0, sizes: [63, 1, 1]),
         .concatND(batch: 1, [4, 5], axis: 1, sizes: [1, 1, 1]),
         .constantPad(batch: 3, [7, 33, 5], before: [0, 1, 0], after: [0, 31, 0], value: 0),
         .constantPad(batch: 1, [65, 63], before: [1, 2], after: [0, 1], value: -2),
         .constantPad(batch: 2, [2, 3, 2, 3, 2], before: [1, 0, 1, 0, 1], after: [0, 1, 0, 1, 0], value: 1),
         .constantPad(batch: 1, [1, 33], before: [0, 0], after: [0, 0], value: 3),
         .concatND(batch: 3, [5, 7, 33], axis: 1, sizes: [7, 7, 7], interleave: true),
         .concatND(batch: 1, [65, 3], axis: 1, sizes: [3, 3], interleave: true),
         .concatND(batch: 2, [31, 1], axis: 0, sizes: [31, 31, 31, 31], interleave: true)]
    }
}
