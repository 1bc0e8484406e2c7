/// Shape inference of the broadcasting and reducing layers: add / multiply with one input (the
/// constant alpha) or two of different shapes, the *Broadcastable layers, loadConstant(ND), reduce and
/// reduceSum / reduceMean / reduceMax.
///
/// Shapes here are the executor's per-example [C, H, W] (the canonical [1, C, H, W] without its batch).
/// For the rank-4 [1, C, H, W] tensors of converted image models that is the model's own view, so
/// broadcasting and axes mean what the model says: axes of the ND layers count on [N, C, H, W] (axis 0
/// is the batch, which is not reduced), and a loadConstantND shape of lower rank is aligned on the
/// right, as numpy broadcasting against a rank-4 tensor aligns it.
extension ShapeInference {
    static func broadcastLayer(_ layer: LayerSpec, inputShapes: [Shape]) throws -> (op: LayerOp, output: Shape, weights: Tensor?) {
        func fail(_ message: String, hint: String? = nil, kind: UpdraftError.Kind = .invalidModel) -> UpdraftError {
            UpdraftError(kind, "layer '\(layer.name)' (\(layer.typeName)): \(message)", hint: hint)
        }
        func expectInputs(_ n: Int) throws {
            guard inputShapes.count == n else { throw fail("has \(inputShapes.count) inputs; expected \(n)") }
        }
        func perExample(_ s: Shape) -> [Int] { [s.c, s.h, s.w] }
        func binary(_ op: BinaryOp) throws -> (LayerOp, Shape, Tensor?) {
            try expectInputs(2)
            let a = perExample(inputShapes[0]), b = perExample(inputShapes[1])
            do {
                let g = try BroadcastGeometry(op: op, a: [1] + a, b: [1] + b)
                return (.broadcast(op, a: a, b: b), Shape(g.outputDims), nil)
            } catch let e as UpdraftError {
                throw fail("inputs '\(layer.inputs[0])' \(inputShapes[0]) and '\(layer.inputs[1])' \(inputShapes[1]): \(e.message)",
                           hint: "broadcasting needs each pair of dimensions equal or one of them 1")
            }
        }

        switch layer.params {
        case let .add(alpha) where inputShapes.count == 1:  // y = x + alpha
            return (.activation(.linear(alpha: 1, beta: alpha)), inputShapes[0], nil)
        case let .multiply(alpha) where inputShapes.count == 1:  // y = alpha x
            return (.activation(.linear(alpha: alpha, beta: 0)), inputShapes[0], nil)
        case .add: return try binary(.add)
        case .multiply: return try binary(.multiply)
        case let .broadcastable(op): return try binary(op)

        case let .loadConstant(c):
            try expectInputs(0)
            var dims = c.shape
            if !c.isND {
                guard dims.count == 3 else { throw fail("shape \(dims) must list 3 values [C, H, W]") }
            } else {
                guard !dims.isEmpty else { throw fail("shape is empty") }
                while dims.count > 4, dims.first == 1 { dims.removeFirst() }
                guard dims.count <= 4 else {
                    throw fail("a rank-\(c.shape.count) constant \(c.shape) is not supported", hint: "Updraft runs constants of up to 4 dimensions (leading 1s aside)",
                               kind: .unsupported)
                }
                dims = [Int](repeating: 1, count: 4 - dims.count) + dims
                guard dims[0] == 1 else {
                    throw fail("constant shape \(c.shape) has \(dims[0]) along the batch axis; Updraft runs constants shared by every example (1 there)",
                               kind: .unsupported)
                }
                dims.removeFirst()
            }
            let shape = try LayerShapes.checkedShape([1] + dims, "layer '\(layer.name)' constant")
            let tensor = try LayerShapes.tensor(c.data, shape: shape, layer: layer, what: "data")
            return (.constant, shape, tensor)

        case let .reduce(r):
            try expectInputs(1)
            let kind: ReductionKind, mean: Bool
            switch r.mode {
            case 0: (kind, mean) = (.sum, false)
            case 1: (kind, mean) = (.sum, true)
            case 7: (kind, mean) = (.max, false)
            default:
                throw fail("\(r.modeName) reduction is not supported", hint: "Updraft runs SUM, AVG and MAX reductions", kind: .unsupported)
            }
            let axes: [Int]
            switch r.axis {
            case 0: axes = [0, 1, 2]
            case 1: axes = [1, 2]
            case 2: axes = [0]
            case 3: axes = [1]
            case 4: axes = [2]
            default: throw fail("axis \(r.axis) is not CHW (0), HW (1), C (2), H (3) or W (4)")
            }
            return try reduction(layer, input: inputShapes[0], axes: axes, kind: kind, mean: mean, keepDims: true, fail)

        case let .reduceND(r):
            try expectInputs(1)
            var axes: [Int] = []
            if r.reduceAll {
                axes = [0, 1, 2]
            } else {
                guard !r.axes.isEmpty else { throw fail("lists no axes and reduceAll is not set") }
                for a in r.axes {
                    let resolved = a < 0 ? a + 4 : a
                    guard resolved >= 0, resolved < 4 else {
                        throw fail("axis \(a) is outside -4...3 for the rank-4 [N, C, H, W] input \(inputShapes[0])")
                    }
                    guard resolved != 0 else {
                        throw fail("reducing over axis 0 (the batch) is not supported", hint: "reduce over the per-example axes 1, 2, 3",
                                   kind: .unsupported)
                    }
                    guard !axes.contains(resolved - 1) else { throw fail("axis \(a) is listed twice") }
                    axes.append(resolved - 1)
                }
            }
            let kind: ReductionKind = r.kind == .max ? .max : .sum
            return try reduction(layer, input: inputShapes[0], axes: axes, kind: kind, mean: r.kind == .mean,
                                 keepDims: r.keepDims, fail)

        default:
            throw fail("is not a broadcasting or reducing layer")
        }
    }

    /// A reduction over per-example `axes` (0 = C, 1 = H, 2 = W): with keepDims the reduced axes stay
    /// as 1s; without, the remaining axes move to the front (the same memory).
    private static func reduction(_ layer: LayerSpec, input: Shape, axes: [Int], kind: ReductionKind, mean: Bool, keepDims: Bool,
                                  _ fail: (String, String?, UpdraftError.Kind) -> UpdraftError) throws -> (op: LayerOp, output: Shape, weights: Tensor?) {
        let dims = [input.c, input.h, input.w]
        var out = dims
        for a in axes { out[a] = 1 }
        if kind == .max, axes.contains(where: { dims[$0] == 0 }) {
            throw fail("a max over an empty axis of \(input) has no value", nil, .invalidModel)
        }
        var shown = out
        if !keepDims {
            shown = dims.enumerated().filter { !axes.contains($0.offset) }.map(\.element)
            while shown.count < 3 { shown.append(1) }
        }
        return (.reduce(kind, input: dims, output: out, mean: mean), Shape([1] + shown), nil)
    }
}

extension LayerParams {
    /// Layers that produce a value without reading any blob (constants).
    var readsNoInput: Bool { if case .loadConstant = self { return true } else { return false } }
}
