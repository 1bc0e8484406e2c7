import UpdraftCore

// The pooling layer (field 120) as one unit on the model side: its parameters, their decoder and
// encoder, and its shape rule. The device side: Backends/DeviceOps+Layers.swift; the executor's kind:
// Layers/PoolingLayer.swift; the geometry and cost: Ops/Pooling.swift.

/// PoolingLayerParams. `type` is the raw PoolingType (MAX=0, AVERAGE=1, L2=2).
public struct PoolingLayerParams: Hashable, Sendable {
    /// PoolingLayerParams.type: 0 MAX, 1 AVERAGE, 2 L2 (any other value kept as read).
    public var type: Int32
    /// [kH, kW]; empty in the file reads as [3, 3].
    public var kernelSize: [Int]
    /// [sH, sW]; empty reads as [1, 1].
    public var stride: [Int]
    /// Valid (with explicit amounts), same, or includeLastPixel padding.
    public var padding: PoolingPadding
    /// PoolingLayerParams.avgPoolExcludePadding: average only over real (not padded) pixels.
    public var excludePadding: Bool
    /// PoolingLayerParams.globalPooling: pool over the whole spatial extent, ignoring kernel size and stride.
    public var global: Bool

    /// Pooling parameters as stored; no defaults applied.
    public init(type: Int32, kernelSize: [Int], stride: [Int], padding: PoolingPadding, excludePadding: Bool, global: Bool) {
        self.type = type; self.kernelSize = kernelSize; self.stride = stride; self.padding = padding
        self.excludePadding = excludePadding; self.global = global
    }

    /// The PoolingType name (`MAX`, `AVERAGE`, `L2`), or "pooling type N" for an unknown one.
    public var typeName: String {
        switch type {
        case 0: return "MAX"
        case 1: return "AVERAGE"
        case 2: return "L2"
        default: return "pooling type \(type)"
        }
    }
}

extension PoolingLayerParams {
    init(reading r: ProtoReader) throws {
        type = try r.int32(1, "type") ?? 0
        kernelSize = sizePair(try r.sizes(10, "kernelSize"), default: [3, 3])
        stride = sizePair(try r.sizes(20, "stride"), default: [1, 1])
        excludePadding = try r.bool(50, "avgPoolExcludePadding") ?? false
        global = try r.bool(60, "globalPooling") ?? false
        padding = .none
        if let f = r.lastOf([30, 31, 32]) {
            let names = [30: "valid", 31: "same", 32: "includeLastPixel"]
            let m = try r.child(f, named: names[f.number] ?? "")
            switch f.number {
            case 30:
                let b = try borderAmounts(try m.message(1, "paddingAmounts"))
                padding = .valid(top: b.top, bottom: b.bottom, left: b.left, right: b.right)
            case 31:
                padding = .same(try samePaddingMode(m))
            default:
                let amounts = try m.sizes(10, "paddingAmounts")
                guard amounts.isEmpty || amounts.count == 2 else {
                    throw UpdraftError(.invalidModel,
                        "\(m.path): paddingAmounts lists \(amounts.count) values; expected 2 (height, width)")
                }
                padding = .includeLastPixel(height: amounts.first ?? 0, width: amounts.last ?? 0)
            }
        }
    }

    func encoded(into w: inout MessageWriter) {
        w.int32(1, type)
        w.sizes(10, kernelSize)
        w.sizes(20, stride)
        switch padding {
        case let .valid(top, bottom, left, right):
            w.message(30) { v in v.message(1, borderAmounts(top: top, bottom: bottom, left: left, right: right)) }
        case let .same(mode):
            w.message(31) { s in s.int32(1, Int32(mode.rawValue)) }
        case let .includeLastPixel(h, wd):
            w.message(32) { m in m.sizes(10, [h, wd]) }
        }
        w.bool(50, excludePadding)
        w.bool(60, global)
    }
}


extension PoolingLayerParams: LayerShapeRule {
    /// One input; MAX and AVERAGE (L2 is refused); Core ML's padding rules (`PoolingSpec.geometry`).
    func inferred(_ c: ShapeRuleContext) throws -> InferredLayer {
        try c.expectInputs(1...1)
        let kind: PoolingKind
        switch type {
        case 0: kind = .max
        case 1: kind = .average
        default: throw c.fail("\(typeName) pooling is not supported; Updraft runs MAX and AVERAGE", kind: .unsupported)
        }
        let (kh, kw) = try c.size(kernelSize, "kernelSize")
        let (sh, sw) = try c.size(stride, "stride")
        switch padding {
        case let .valid(t, b, l, r): try c.checkPadding([t, b, l, r])
        case let .includeLastPixel(h, w): try c.checkPadding([h, w])
        case .same: break
        }
        let spec = PoolingSpec(kind: kind, kernelH: kh, kernelW: kw, strideH: sh, strideW: sw, padding: padding,
                               excludePadding: excludePadding, global: global)
        let g = try c.geometry { try spec.geometry(input: c.input) }
        return InferredLayer(op: .pooling(spec), output: g.outputShape)
    }
}
