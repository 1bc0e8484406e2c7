import UpdraftCore

/// One op invocation to verify: which op, its parameters and sizes, and a readable name.
///
/// The same descriptions drive the finite-difference checks (`GradientCheck`), the backend
/// comparisons (`BackendComparison`) and the benchmarks, so a failing row names a case that every
/// tool can rerun. Data is not part of the description: each tool draws it from a seed derived
/// from the case's name, so the same case always sees the same values.
public struct OpCase: Hashable, Sendable, CustomStringConvertible {
    /// Which op a case runs, with its parameters and sizes (batch included).
    public enum Kind: Hashable, Sendable {
        /// upload, download, fill, copy and accumulate on `count` elements.
        case memory(count: Int)
        /// A convolution, then the `epilogue` function fused into it (nil: none).
        case convolution(ConvolutionSpec, input: Shape, epilogue: Activation?)
        /// An inner product on `input` (flattened per example), then the `epilogue` function fused into it (nil: none).
        case innerProduct(InnerProductSpec, input: Shape, epilogue: Activation?)
        /// An activation, clip or unary function over [batch, channels, spatial].
        case activation(Activation, ActivationGeometry)
        /// Max or average pooling (or global pooling) of an input [N, C, H, W].
        case pooling(PoolingSpec, input: Shape)
        /// Inputs [batch, channels[i], spatial] joined along channels.
        case concat(channels: [Int], batch: Int, spatial: Int)
        /// Softmax over channels, forward and backward.
        case softmax(SoftmaxGeometry)
        /// Fused softmax + cross-entropy on logits [batch, classes].
        case softmaxCrossEntropy(batch: Int, classes: Int)
        /// Mean squared error loss over `count` values and its input gradient.
        case meanSquaredError(count: Int)
        /// y[c] = scale[c] * x[c] + shift[c] over an NCHW shape (frozen batchnorm), forward and backward.
        case channelAffine(Shape)
        /// An element-wise op on `count` values of same-shape operands.
        case elementwise(ElementwiseOp, count: Int)
        /// `steps` optimizer steps on a tensor of `count` parameters.
        case sgd(SGDHyperparameters, count: Int, steps: Int)
        /// `steps` Adam steps on a tensor of `count` parameters.
        case adam(AdamHyperparameters, count: Int, steps: Int)
        /// Padding, upsample, LRN, L2 normalize or instance normalization of an input [N, C, H, W].
        case spatial(SpatialOp, input: Shape)
        /// A broadcasting binary op (forward, and both operands' gradients).
        case broadcast(BroadcastGeometry)
        /// A reduction to a shape (forward and backward).
        case reduction(ReductionGeometry)
        /// A layout op on `batch` examples (transpose, concatND, …; Verification+Layout.swift): the
        /// backend's composition (`Backend.layoutForward` / `layoutBackward`) against the op's definition.
        case layout(LayoutOp, batch: Int)
    }

    /// How the tools draw the case's data.
    public enum InputValues: Hashable, Sendable {
        /// Uniform random values (ranges chosen per op).
        case uniform
        /// Only -1, -0.5, 0, 0.5 and 1: many exact ties (max pooling's "first maximum" rule, arg-max).
        case coarse
    }

    /// The op, its parameters and sizes.
    public var kind: Kind
    /// How the data is drawn; `.uniform` by default.
    public var values: InputValues
    /// A readable name, unique within a case list, e.g. "[3, 7, 31, 33] → 32 k3x3 s2 pad 1/0/1/0".
    public var name: String

    /// A case; without `name`, the name is the kind's summary, plus " ties" for coarse values.
    public init(_ kind: Kind, values: InputValues = .uniform, name: String? = nil) {
        self.kind = kind
        self.values = values
        self.name = name ?? (kind.summary + (values == .coarse ? " ties" : ""))
    }

    /// The op family, as `--op` filters match it: "convolution", "pooling", "sgd", ….
    public var op: String { kind.opName }
    /// The op family and the case name, e.g. "pooling max [2, 3, 8, 8] k2x2 s2x2"; also the seed's input.
    public var description: String { "\(op) \(name)" }

    /// True when `filter` is nil or empty, or occurs in the op name (case-insensitive).
    public func matches(_ filter: String?) -> Bool {
        guard let filter, !filter.isEmpty else { return true }
        let f = filter.lowercased()
        return op.lowercased().contains(f) || (kind.variantName?.lowercased().contains(f) ?? false)
    }

    /// A seed derived from the op and the name (FNV-1a), so data does not depend on a case's position in a list.
    public func seed(_ base: UInt64 = 0) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325 ^ base
        for byte in description.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        return hash
    }
}

extension OpCase.Kind {
    /// The op family name that `--op` filters and report rows use ("convolution", "reduce", a spatial op's family name, …).
    public var opName: String {
        switch self {
        case .memory: return "memory"
        case .convolution: return "convolution"
        case .innerProduct: return "innerProduct"
        case .activation: return "activation"
        case .pooling: return "pooling"
        case .concat: return "concat"
        case .softmax: return "softmax"
        case .softmaxCrossEntropy: return "softmaxCrossEntropy"
        case .meanSquaredError: return "meanSquaredError"
        case .channelAffine: return "channelAffine"
        case .elementwise: return "elementwise"
        case .sgd: return "sgd"
        case .adam: return "adam"
        case let .spatial(op, _): return op.familyName
        case .broadcast: return "broadcast"
        case .reduction: return "reduce"
        case let .layout(op, _): return op.name
        }
    }

    /// The parameters in a few words: the default case name.
    /// A finer name `--op` also matches: a reduction's Core ML layer name ("reduceL1", "reduceArgMax", ...).
    public var variantName: String? {
        guard case let .reduction(g) = self else { return nil }
        return "reduce" + g.kind.rawValue.prefix(1).uppercased() + g.kind.rawValue.dropFirst()
    }

    var summary: String {
        switch self {
        case let .memory(count): return "×\(count)"
        case let .convolution(s, input, epilogue):
            var t = "\(input) → \(s.outputChannels) k\(s.kernelH)x\(s.kernelW)"
            if s.strideH != 1 || s.strideW != 1 { t += " s\(s.strideH)x\(s.strideW)" }
            if s.dilationH != 1 || s.dilationW != 1 { t += " d\(s.dilationH)x\(s.dilationW)" }
            if s.groups != 1 { t += " g\(s.groups)" }
            switch s.padding {
            case let .valid(top, bottom, left, right) where top + bottom + left + right > 0:
                t += " pad \(top)/\(bottom)/\(left)/\(right)"
            case .valid: break
            case let .same(mode): t += mode == .bottomRightHeavy ? " same" : " same-topleft"
            }
            if !s.hasBias { t += " no-bias" }
            if let epilogue { t += " +\(epilogue)" }
            return t
        case let .innerProduct(s, input, epilogue):
            return "\(input) → \(s.outputChannels)" + (s.hasBias ? "" : " no-bias") + (epilogue.map { " +\($0)" } ?? "")
        case let .activation(a, g):
            return g.batch == 1 && g.channels == 1 ? "\(a) ×\(g.spatial)" : "\(a) [\(g.batch), \(g.channels), \(g.spatial)]"
        case let .pooling(s, input):
            let kind = s.kind == .max ? "max" : "avg"
            if s.global { return "global \(kind) \(input)" }
            var t = "\(kind) \(input) k\(s.kernelH)x\(s.kernelW) s\(s.strideH)x\(s.strideW)"
            switch s.padding {
            case let .valid(top, bottom, left, right) where top + bottom + left + right > 0:
                t += " pad \(top)/\(bottom)/\(left)/\(right)"
            case .valid: break
            case let .same(mode): t += mode == .bottomRightHeavy ? " same" : " same-topleft"
            case let .includeLastPixel(h, w): t += " ceil pad \(h)/\(w)"
            }
            if s.kind == .average { t += s.excludePadding ? " exclude-pad" : " include-pad" }
            return t
        case let .concat(channels, batch, spatial):
            return "n\(batch) channels \(channels.map(String.init).joined(separator: "+")) spatial \(spatial)"
        case let .softmax(g): return "[\(g.batch), \(g.channels), \(g.spatial)]"
        case let .softmaxCrossEntropy(batch, classes): return "[\(batch), \(classes)]"
        case let .meanSquaredError(count): return "×\(count)"
        case let .channelAffine(shape): return "\(shape)"
        case let .elementwise(op, count): return "\(op == .add ? "add" : "multiply") ×\(count)"
        case let .sgd(h, count, steps):
            return "×\(count) \(steps) step\(steps == 1 ? "" : "s") lr \(h.learningRate) momentum \(h.momentum) decay \(h.weightDecay)"
        case let .adam(h, count, steps):
            return "×\(count) \(steps) step\(steps == 1 ? "" : "s") lr \(h.learningRate) b1 \(h.beta1) b2 \(h.beta2) decay \(h.weightDecay)"
        case let .spatial(op, input): return op.summary(input)
        case let .broadcast(g): return "\(g.aDims) \(g.op.rawValue) \(g.bDims)"
        case let .reduction(g):
            let kind = g.kind != .sum ? g.kind.rawValue : (g.scale == 1 ? "sum" : g.scale == -1 ? "-sum" : "sum x\(g.scale)")
            return "\(kind) \(g.inputDims) → \(g.outputDims)"
        case let .layout(op, batch): return "n\(batch) \(op)"
        }
    }
}

// MARK: Building cases

extension OpCase {
    /// A convolution case from its sizes.
    public static func convolution(_ input: Shape, outputChannels: Int, kernel: (Int, Int), stride: (Int, Int) = (1, 1),
                                   dilation: (Int, Int) = (1, 1), groups: Int = 1, padding: ConvolutionPadding = .none,
                                   bias: Bool = true, fusedReLU: Bool = false, epilogue: Activation? = nil,
                                   values: InputValues = .uniform) -> OpCase {
        let spec = ConvolutionSpec(inputChannels: input.c, outputChannels: outputChannels, kernelH: kernel.0, kernelW: kernel.1,
                                   strideH: stride.0, strideW: stride.1, dilationH: dilation.0, dilationW: dilation.1,
                                   groups: groups, padding: padding, hasBias: bias)
        return OpCase(.convolution(spec, input: input, epilogue: epilogue ?? (fusedReLU ? .relu : nil)), values: values)
    }

    /// An inner-product case on `input` (C_in is its per-example element count), with bias and no epilogue by default.
    public static func innerProduct(_ input: Shape, outputChannels: Int, bias: Bool = true, epilogue: Activation? = nil) -> OpCase {
        OpCase(.innerProduct(InnerProductSpec(inputChannels: input.itemCount, outputChannels: outputChannels, hasBias: bias),
                             input: input, epilogue: epilogue))
    }

    /// A max or average pooling case; no padding and padding excluded from averages by default.
    public static func pooling(_ kind: PoolingKind, _ input: Shape, kernel: (Int, Int), stride: (Int, Int),
                               padding: PoolingPadding = .none, excludePadding: Bool = true,
                               values: InputValues = .uniform) -> OpCase {
        OpCase(.pooling(PoolingSpec(kind: kind, kernelH: kernel.0, kernelW: kernel.1, strideH: stride.0, strideW: stride.1,
                                    padding: padding, excludePadding: excludePadding), input: input), values: values)
    }

    /// A global max or average pooling case (each plane pooled to 1x1).
    public static func globalPooling(_ kind: PoolingKind, _ input: Shape, values: InputValues = .uniform) -> OpCase {
        OpCase(.pooling(PoolingSpec(kind: kind, global: true), input: input), values: values)
    }
}

extension OpCase.Kind {
    /// An activation over `count` values of one channel.
    public static func activation(_ a: Activation, count: Int) -> OpCase.Kind { .activation(a, ActivationGeometry(count: count)) }
}
