import UpdraftCore

/// Shape inference of the broadcasting and reducing layers: add / multiply with one input (the
/// constant alpha) or two of different shapes, the *Broadcastable layers, loadConstant(ND), reduce, the
/// ND reduce layers and argMax / argMin (the modes in Ops/Reduce.swift).
///
/// Broadcasting and axes work on the blobs' logical (N-D) shapes, as the model describes them
/// (`LogicalShape`): numpy's rules align dimensions on the right, axes count on the model's rank, and
/// the batch axis is neither reduced nor broadcast. Each example's memory is its dimensions after the
/// batch axis, which is what the ops run on (the batch prepended).
extension ShapeInference {
    static func broadcastLayer(_ layer: LayerSpec, inputShapes: [Shape], logical: [LogicalShape]) throws
        -> (op: LayerOp, output: Shape, weights: Tensor?, logical: LogicalShape?) {
        func fail(_ message: String, hint: String? = nil, kind: UpdraftError.Kind = .invalidModel) -> UpdraftError {
            UpdraftError(kind, "layer '\(layer.name)' (\(layer.typeName)): \(message)", hint: hint)
        }
        func expectInputs(_ n: Int) throws {
            guard inputShapes.count == n else { throw fail("has \(inputShapes.count) inputs; expected \(n)") }
        }
        func binary(_ op: BinaryOp) throws -> (LayerOp, Shape, Tensor?, LogicalShape?) {
            try expectInputs(2)
            let (a, b) = (logical[0], logical[1])
            // numpy on the model's dimensions (aligned on the right); the batch (1 here) broadcasts like
            // any 1, and each example's memory is its dimensions after the batch axis.
            let full: BroadcastGeometry
            do {
                full = try BroadcastGeometry(op: op, a: a.dims, b: b.dims)
            } catch let e as UpdraftError {
                throw fail("inputs '\(layer.inputs[0])' \(a) and '\(layer.inputs[1])' \(b): \(e.message)",
                           hint: "broadcasting needs each pair of dimensions, aligned on the right, equal or one of them 1")
            }
            let longer = a.rank >= b.rank ? a : b
            let outLogical = LogicalShape(full.outputDims, batchAxis: longer.batchAxis)
            let rank = max(a.exampleDims.count, b.exampleDims.count, outLogical.exampleDims.count, 1)
            guard rank + 1 <= BroadcastGeometry.maxRank else {
                throw fail("broadcasting \(a) and \(b) has \(rank) dimensions per example; Updraft runs up to \(BroadcastGeometry.maxRank - 1)",
                           kind: .unsupported)
            }
            func padded(_ d: [Int]) -> [Int] { [Int](repeating: 1, count: rank - d.count) + d }
            let (ea, eb, eo) = (padded(a.exampleDims), padded(b.exampleDims), padded(outLogical.exampleDims))
            guard let g = try? BroadcastGeometry(op: op, a: [1] + ea, b: [1] + eb), g.outputDims == [1] + eo else {
                throw fail("inputs '\(layer.inputs[0])' \(a) and '\(layer.inputs[1])' \(b) broadcast across the batch axis, which Updraft does not run",
                           kind: .unsupported)
            }
            return (.broadcast(op, a: ea, b: eb), outLogical.canonical, nil, outLogical)
        }

        switch layer.params {
        case let .add(alpha) where inputShapes.count == 1:  // y = x + alpha
            return (.activation(.linear(alpha: 1, beta: alpha)), inputShapes[0], nil, nil)
        case let .multiply(alpha) where inputShapes.count == 1:  // y = alpha x
            return (.activation(.linear(alpha: alpha, beta: 0)), inputShapes[0], nil, nil)
        case .add: return try binary(.add)
        case .multiply: return try binary(.multiply)
        case let .broadcastable(op): return try binary(op)

        case let .loadConstant(c):
            try expectInputs(0)
            // The same values for every example: loadConstant's [C, H, W] is [1, 1, C, H, W] (batch at 1);
            // a loadConstantND shape keeps its dimensions, a leading 1 read as the batch.
            let dims = c.isND ? c.shape : [1, 1] + c.shape
            if !c.isND, c.shape.count != 3 { throw fail("shape \(c.shape) must list 3 values [C, H, W]") }
            guard !dims.isEmpty, dims.count <= 5 else {
                throw fail("a constant of shape \(c.shape) is not supported", hint: "Updraft runs constants of rank 1 to 5", kind: .unsupported)
            }
            let logicalShape = LogicalShape(dims, batchAxis: c.isND ? (dims.count >= 2 && dims[0] == 1 ? 0 : nil) : 1)
            let shape = try LayerShapes.checkedShape(logicalShape.canonical.dims, "layer '\(layer.name)' constant")
            let tensor = try LayerShapes.tensor(c.data, shape: shape, layer: layer, what: "data")
            return (.constant, shape, tensor, logicalShape)

        case let .reduce(r):
            try expectInputs(1)
            guard let mode = ReduceMode.reduceLayer(mode: r.mode) else {
                let names = ReduceMode.allCases.compactMap { m in m.reduceLayerMode.map { ReduceLayerParams(mode: $0, axis: 0).modeName } }
                let list = names.count > 1 ? names.dropLast().joined(separator: ", ") + " and " + names.last! : names.joined()
                throw fail("\(r.modeName) reduction is not supported", hint: "Updraft runs \(list) reductions",
                           kind: .unsupported)
            }
            let axes: [Int]
            switch r.axis {
            case 0: axes = [-3, -2, -1]
            case 1: axes = [-2, -1]
            case 2: axes = [-3]
            case 3: axes = [-2]
            case 4: axes = [-1]
            default: throw fail("axis \(r.axis) is not CHW (0), HW (1), C (2), H (3) or W (4)")
            }
            guard logical[0].rank >= -axes[0] else {
                throw fail("reducing axes \(axes) needs an input of rank \(-axes[0]) or more; '\(layer.inputs[0])' is \(logical[0])")
            }
            if mode.kind.isIndex, axes.count > 1 {
                throw fail("\(r.modeName) over several axes is not defined", hint: "Core ML's ARGMAX reduces one axis: C, H or W")
            }
            // epsilon: what LOGSUM adds to the sum inside its log.
            return try reduction(layer, logical[0], axes: axes, all: false, mode: mode, offset: Double(r.epsilon), keepDims: true, fail)

        case let .reduceND(r):
            try expectInputs(1)
            guard r.reduceAll || !r.axes.isEmpty else { throw fail("lists no axes and reduceAll is not set") }
            return try reduction(layer, logical[0], axes: r.axes, all: r.reduceAll, mode: r.kind, offset: 0, keepDims: r.keepDims, fail)

        default:
            throw fail("is not a broadcasting or reducing layer")
        }
    }

    /// A reduction over `axes` of the model's dimensions (negative from the end), or over every
    /// dimension of an example (`all`). The batch axis is refused; dimensions before it are 1.
    private static func reduction(_ layer: LayerSpec, _ input: LogicalShape, axes: [Int], all: Bool, mode: ReduceMode,
                                  offset: Double, keepDims: Bool, _ fail: (String, String?, UpdraftError.Kind) -> UpdraftError) throws
        -> (op: LayerOp, output: Shape, weights: Tensor?, logical: LogicalShape?) {
        let first = input.batchAxis.map { $0 + 1 } ?? 0  // the first per-example dimension
        var reduced = Set<Int>()
        if all {
            reduced = Set(first..<input.rank)
        } else {
            for a in axes {
                let resolved = a < 0 ? a + input.rank : a
                guard resolved >= 0, resolved < input.rank else {
                    throw fail("axis \(a) is outside \(-input.rank)...\(input.rank - 1) for the rank-\(input.rank) input \(input)", nil, .invalidModel)
                }
                if resolved == input.batchAxis {
                    throw fail("reducing over axis \(a) (the batch of \(input)) is not supported", "reduce over the per-example axes", .unsupported)
                }
                guard reduced.insert(resolved).inserted else { throw fail("axis \(a) is listed twice", nil, .invalidModel) }
            }
        }
        let example = input.exampleDims
        var out = example
        for d in reduced where d >= first { out[d - first] = 1 }
        if mode.kind.needsElements, reduced.contains(where: { $0 >= first && example[$0 - first] == 0 }) {
            throw fail("a \(mode.kind.rawValue) over an empty axis of \(input) has no value", nil, .invalidModel)
        }
        guard example.count + 1 <= BroadcastGeometry.maxRank else {
            throw fail("a rank-\(input.rank) reduction is not supported", nil, .unsupported)
        }
        // The output as the model sees it: reduced dimensions kept as 1 or dropped.
        var dims: [Int] = [], batchAxis: Int? = nil
        for (d, size) in input.dims.enumerated() {
            if d == input.batchAxis { batchAxis = dims.count }
            if reduced.contains(d) {
                if keepDims { dims.append(1) }
            } else {
                dims.append(d >= first ? out[d - first] : size)
            }
        }
        if dims.isEmpty { dims = [1] }
        let outLogical = LogicalShape(dims, batchAxis: batchAxis)
        let spec = ReductionSpec(mode: mode, input: example.isEmpty ? [1] : example, output: out.isEmpty ? [1] : out, offset: offset)
        return (.reduce(spec),
                outLogical.canonical, nil, outLogical)
    }
}

extension LayerParams {
    /// Layers that produce a value without reading any blob (constants).
    var readsNoInput: Bool { if case .loadConstant = self { return true } else { return false } }
}
