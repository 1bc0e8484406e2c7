/// Shape inference of the layout layers on the logical N-D shape (LogicalShape): the op, the
/// canonical 4-D output and the output's logical shape. Errors name the layer, its type, the
/// parameter and the shapes.

extension ShapeInference {
    static func layout(_ params: LayoutLayerParams, layer: LayerSpec, inputShapes: [Shape],
                       logical: [LogicalShape]) throws -> (LayerOp, Shape, LogicalShape?) {
        func fail(_ message: String, hint: String? = nil, kind: UpdraftError.Kind = .invalidModel) -> UpdraftError {
            UpdraftError(kind, "layer '\(layer.name)' (\(layer.typeName)): \(message)", hint: hint)
        }
        guard let x = logical.first else { throw fail("has no input") }
        if case .concatND = params {} else {
            guard logical.count == 1 else { throw fail("has \(logical.count) inputs; expected 1") }
        }
        let kind = layer.typeName
        /// An alias op's result: the same values under `out`, checked for size and element count.
        func alias(_ out: LogicalShape) throws -> (LayerOp, Shape, LogicalShape?) {
            _ = try LayerShapes.checkedShape(out.dims, "layer '\(layer.name)' (\(kind)) output")
            guard out.count == x.count else {
                throw fail("output shape \(out.dims) holds \(out.count) values but the input '\(layer.inputs[0])' of shape \(x.dims) holds \(x.count)")
            }
            let canonical = try LayerShapes.checkedShape(out.canonical.dims, "layer '\(layer.name)' (\(kind)) output")
            return (.layout(.alias(kind: kind)), canonical, out)
        }

        switch params {
        case let .reshapeStatic(target):
            guard !target.isEmpty else { throw fail("targetShape is empty") }
            var dims = target
            let unknown = target.indices.filter { target[$0] == -1 }
            guard unknown.count <= 1 else { throw fail("targetShape \(target) has more than one -1") }
            for d in target where d == 0 || d < -1 {
                throw fail("targetShape \(target) has dimension \(d); dimensions must be positive (or one -1, inferred)")
            }
            if let u = unknown.first {
                let known = target.filter { $0 > 0 }.reduce(1) { $0.multipliedReportingOverflow(by: $1).partialValue }
                guard known > 0, x.count % known == 0 else {
                    throw fail("targetShape \(target) cannot hold the \(x.count) values of input '\(layer.inputs[0])' (shape \(x.dims))")
                }
                dims[u] = x.count / known
            }
            return try alias(x.reshaped(to: dims))

        case let .reshape(target, mode):
            guard target.count == 3 || target.count == 4 else {
                throw fail("targetShape \(target) has \(target.count) values; expected 3 ([C, H, W]) or 4 ([Seq, C, H, W])")
            }
            if target.count == 4, target[0] != 1 {
                throw fail("targetShape \(target) sets the sequence length to \(target[0]); Updraft runs sequence length 1",
                           kind: .unsupported)
            }
            let chw = Array(target.suffix(3))
            for d in chw where d < 1 { throw fail("targetShape \(target) has dimension \(d); dimensions must be positive") }
            let e = x.canonical
            switch mode {
            case 0: break
            case 1:
                // CHANNEL_LAST reads (H, W, C) order; it is the same as CHANNEL_FIRST when one side of each is 1.
                guard e.h * e.w == 1 || e.c == 1, chw[1] * chw[2] == 1 || chw[0] == 1 else {
                    throw fail("CHANNEL_LAST reshape of \(x.dims) to \(target) rearranges the data, which is not supported",
                               hint: "use CHANNEL_FIRST (mode 0), or a transpose followed by reshapeStatic", kind: .unsupported)
                }
            default: throw fail("mode \(mode) is not CHANNEL_FIRST (0) or CHANNEL_LAST (1)")
            }
            let prefix = x.batchAxis.map { Array(x.dims[...$0]) } ?? []
            return try alias(LogicalShape(prefix + chw, batchAxis: x.batchAxis))

        case let .flattenTo2D(axis):
            // A negative axis counts from the end (-1: the last axis); a positive one may be the rank itself.
            let a = axis < 0 ? axis + x.rank : axis
            guard a >= 0, a <= x.rank else {
                throw fail("axis \(axis) is outside \(-x.rank)...\(x.rank) for input '\(layer.inputs[0])' of shape \(x.dims)")
            }
            return try alias(x.reshaped(to: [x.dims[..<a].reduce(1, *), x.dims[a...].reduce(1, *)]))

        case let .squeeze(axes, squeezeAll):
            var remove: Set<Int> = []
            if squeezeAll {
                remove = Set(x.dims.indices.filter { x.dims[$0] == 1 })
            } else {
                guard !axes.isEmpty else { throw fail("lists no axes and squeezeAll is false", hint: "set axes, or squeezeAll") }
                for a in axes {
                    let r = try x.axis(a, "layer '\(layer.name)' (\(kind)) axes \(axes)")
                    guard x.dims[r] == 1 else {
                        throw fail("axis \(a) of input '\(layer.inputs[0])' (shape \(x.dims)) has size \(x.dims[r]); only axes of size 1 can be squeezed")
                    }
                    guard remove.insert(r).inserted else { throw fail("axes \(axes) name axis \(r) twice") }
                }
            }
            var dims: [Int] = [], batch: Int? = nil
            for (i, d) in x.dims.enumerated() where !remove.contains(i) {
                if i == x.batchAxis { batch = dims.count }
                dims.append(d)
            }
            if dims.isEmpty { dims = [1] }  // Core ML keeps at least rank 1
            return try alias(LogicalShape(dims, batchAxis: batch))

        case let .expandDims(axes):
            guard !axes.isEmpty else { throw fail("lists no axes") }
            let rank = x.rank + axes.count
            var inserted: Set<Int> = []
            for a in axes {
                let r = try x.axis(a, rank: rank, "layer '\(layer.name)' (\(kind)) axes \(axes) (output rank \(rank))")
                guard inserted.insert(r).inserted else { throw fail("axes \(axes) name output axis \(r) twice") }
            }
            var dims: [Int] = [], batch: Int? = nil, next = 0
            for i in 0..<rank {
                if inserted.contains(i) { dims.append(1); continue }
                if next == x.batchAxis { batch = i }
                dims.append(x.dims[next])
                next += 1
            }
            return try alias(LogicalShape(dims, batchAxis: batch))

        case .copy:
            return try alias(x)

        case .transpose, .permute, .softmaxND, .concatND:
            throw fail("is not supported yet", hint: "Updraft runs reshapeStatic, reshape, flattenTo2D, squeeze, expandDims and copy layout layers",
                       kind: .unsupported)
        }
    }
}
