import Foundation

/// Element-wise functions: every Core ML ActivationParams kind, the clip layer and the unary-function
/// layer. One value describes the function and its constants; `ActivationKind` (ActivationTable.swift)
/// is the table the CPU loops, the OpenCL `-D` defines and the fused epilogues are generated from.
///
/// PReLU and parametric softplus carry per-channel constants (length C, or 1 for all channels): they
/// need the channel geometry of the tensor they run on (`ActivationGeometry`).
public enum Activation: Hashable, Sendable, CustomStringConvertible {
    /// y = alpha * x + beta.
    case linear(alpha: Float, beta: Float)
    /// y = max(x, 0).
    case relu
    /// y = x for x > 0, alpha * x otherwise.
    case leakyReLU(alpha: Float)
    /// y = x for x >= alpha, 0 otherwise.
    case thresholdedReLU(alpha: Float)
    /// Leaky ReLU with one slope per channel (length C or 1).
    case prelu(alpha: [Float])
    /// y = tanh(x).
    case tanh
    /// y = alpha * tanh(beta * x).
    case scaledTanh(alpha: Float, beta: Float)
    /// y = 1 / (1 + e^-x).
    case sigmoid
    /// y = min(max(alpha * x + beta, 0), 1).
    case sigmoidHard(alpha: Float, beta: Float)
    /// y = x for x > 0, alpha * (e^x - 1) otherwise.
    case elu(alpha: Float)
    /// y = x / (1 + |x|).
    case softsign
    /// y = log(1 + e^x).
    case softplus
    /// y = alpha_c * log(1 + e^(beta_c * x)), per channel (each length C or 1).
    case parametricSoftplus(alpha: [Float], beta: [Float])
    /// y = min(max(x, min), max) (Core ML's clip layer; ReLU6 is clip(0, 6)).
    case clip(min: Float, max: Float)
    /// Core ML's unary-function layer: f(scale * x + shift).
    case unary(UnaryFunction)

    /// The function and its constants, e.g. "leakyReLU(0.01)"; per-channel arrays show as a count.
    public var description: String {
        switch self {
        case let .linear(a, b): return "linear(\(a), \(b))"
        case .relu: return "relu"
        case let .leakyReLU(a): return "leakyReLU(\(a))"
        case let .thresholdedReLU(a): return "thresholdedReLU(\(a))"
        case let .prelu(a): return a.count == 1 ? "PReLU(\(a[0]))" : "PReLU(\(a.count) slopes)"
        case .tanh: return "tanh"
        case let .scaledTanh(a, b): return "scaledTanh(\(a), \(b))"
        case .sigmoid: return "sigmoid"
        case let .sigmoidHard(a, b): return "sigmoidHard(\(a), \(b))"
        case let .elu(a): return "ELU(\(a))"
        case .softsign: return "softsign"
        case .softplus: return "softplus"
        case let .parametricSoftplus(a, b):
            return a.count == 1 && b.count == 1 ? "parametricSoftplus(\(a[0]), \(b[0]))"
                : "parametricSoftplus(\(a.count) alphas, \(b.count) betas)"
        case let .clip(lo, hi): return "clip(\(lo), \(hi))"
        case let .unary(u): return u.description
        }
    }

    /// The table row this function runs as.
    public var kind: ActivationKind {
        switch self {
        case .linear: return .linear
        case .relu: return .relu
        case .leakyReLU: return .leakyReLU
        case .thresholdedReLU: return .thresholdedReLU
        case .prelu: return .prelu
        case .tanh: return .tanh
        case .scaledTanh: return .scaledTanh
        case .sigmoid: return .sigmoid
        case .sigmoidHard: return .sigmoidHard
        case .elu: return .elu
        case .softsign: return .softsign
        case .softplus: return .softplus
        case .parametricSoftplus: return .parametricSoftplus
        case .clip: return .clip
        case let .unary(u): return u.operation.kind
        }
    }

    /// The scalar constants as the table reads them (see `ActivationScalars`). Per-channel kinds read
    /// their slopes from `channelConstants` instead.
    public var scalars: ActivationScalars {
        switch self {
        case let .linear(a, b), let .scaledTanh(a, b), let .sigmoidHard(a, b): return ActivationScalars(a, b)
        case let .leakyReLU(a), let .thresholdedReLU(a), let .elu(a): return ActivationScalars(a)
        case let .clip(lo, hi): return ActivationScalars(lo, hi)
        case let .unary(u): return ActivationScalars(u.alpha, u.epsilon, u.scale, u.shift)
        case let .prelu(a): return ActivationScalars(a.first ?? 0)
        case let .parametricSoftplus(a, b): return ActivationScalars(a.first ?? 0, b.first ?? 0)
        case .relu, .tanh, .sigmoid, .softsign, .softplus: return ActivationScalars()
        }
    }

    /// Per-channel constants for `channels` channels, [a_0 … a_{C-1}, b_0 … b_{C-1}] (the table's `a`
    /// and `b` of each channel), with length-1 lists repeated; nil for kinds without per-channel constants.
    public func channelConstants(channels: Int) throws -> [Float]? {
        switch self {
        case let .prelu(alpha):
            return try Self.expand(alpha, "PReLU alpha", channels) + [Float](repeating: 0, count: channels)
        case let .parametricSoftplus(alpha, beta):
            return try Self.expand(alpha, "parametricSoftplus alpha", channels)
                + (try Self.expand(beta, "parametricSoftplus beta", channels))
        default: return nil
        }
    }

    private static func expand(_ values: [Float], _ what: String, _ channels: Int) throws -> [Float] {
        if values.count == channels { return values }
        if values.count == 1 { return [Float](repeating: values[0], count: channels) }
        throw UpdraftError(.invalidModel, "\(what) has \(values.count) values but the tensor has \(channels) channels",
                           hint: "give one value per channel, or a single value for all channels")
    }

    /// Throws unless the constants fit a tensor of `channels` channels and are finite.
    public func validate(channels: Int) throws {
        _ = try channelConstants(channels: channels)
        let all: [Float]
        switch self {
        case let .prelu(a): all = a
        case let .parametricSoftplus(a, b): all = a + b
        default: let s = scalars; all = [s.a, s.b, s.c, s.d]
        }
        if let bad = all.first(where: { !$0.isFinite }) {
            throw UpdraftError(.invalidModel, "activation \(self) has a non-finite constant (\(bad))",
                               hint: "every activation parameter must be a finite number")
        }
        if case let .prelu(a) = self, a.isEmpty {
            throw UpdraftError(.invalidModel, "PReLU has no alpha values", hint: "give one slope per channel, or one for all")
        }
        if case let .parametricSoftplus(a, b) = self, a.isEmpty || b.isEmpty {
            throw UpdraftError(.invalidModel, "parametricSoftplus has no alpha or beta values",
                               hint: "give one value per channel, or one for all")
        }
    }

    /// Whether backward reads the output y (true) or the input x (false). Where the function allows it
    /// the derivative comes from y, so a fused epilogue need not keep its pre-activation: ReLU-like
    /// kinds read y when their slopes keep the sign (y > 0 iff x > 0), smooth ones through their
    /// closed forms (sigmoid: y(1 - y), softplus: 1 - e^-y, …); power, log and abs read x.
    public var backwardReadsOutput: Bool {
        switch self {
        case let .leakyReLU(a), let .thresholdedReLU(a), let .elu(a): return a >= 0
        case let .prelu(a): return a.allSatisfy { $0 >= 0 }
        default: return kind.derivativeFromOutput
        }
    }

    /// Forward cost over `count` elements: the table row's flops per element, one read and one write each.
    public func forwardCost(count: Int) -> OpCost {
        OpCost(flops: Double(count * kind.flops), bytes: f32Bytes(count, count))
    }
    /// Backward cost over `count` elements: one more flop per element than forward (the multiply by dy); reads two arrays, writes one.
    public func backwardCost(count: Int) -> OpCost {
        OpCost(flops: Double(count * (kind.flops + 1)), bytes: f32Bytes(2 * count, count))
    }
}

/// The four scalar constants a table row reads: linear, scaledTanh and sigmoidHard (alpha, beta);
/// leakyReLU, thresholdedReLU, ELU (alpha); clip (min, max); unary functions (alpha, epsilon,
/// scale, shift); PReLU and parametric softplus read a and b per channel.
public struct ActivationScalars: Hashable, Sendable {
    /// The four constants, whose meaning depends on the function (see the type's comment); unused ones are 0.
    public var a: Float, b: Float, c: Float, d: Float
    /// Constants in table order; any left out are 0.
    public init(_ a: Float = 0, _ b: Float = 0, _ c: Float = 0, _ d: Float = 0) { self.a = a; self.b = b; self.c = c; self.d = d }
}

/// Where an element-wise function runs: x and y are [batch, channels, spatial] in memory; per-channel
/// constants are indexed by the channel (i / spatial) % channels.
public struct ActivationGeometry: Hashable, Sendable {
    /// Images N, channels C, and values per channel per image (H * W).
    public var batch: Int, channels: Int, spatial: Int
    /// A geometry of `batch` images of `channels` channels with `spatial` values each.
    public init(batch: Int, channels: Int, spatial: Int) { self.batch = batch; self.channels = channels; self.spatial = spatial }
    /// [N, C, H, W] as N images of C channels of H*W values.
    public init(shape: Shape) { self.init(batch: shape.n, channels: shape.c, spatial: shape.h * shape.w) }
    /// `count` values of one channel (for functions without per-channel constants).
    public init(count: Int) { self.init(batch: 1, channels: 1, spatial: count) }
    /// Total elements: batch * channels * spatial.
    public var count: Int { batch * channels * spatial }
}

/// Core ML's UnaryFunctionLayerParams with its defaults applied: y = f(scale * x + shift), with
/// epsilon in rsqrt and inverse and alpha in power and threshold.
public struct UnaryFunction: Hashable, Sendable, CustomStringConvertible {
    /// UnaryFunctionLayerParams.Operation, numbered as in NeuralNetwork.proto.
    public enum Operation: Int32, CaseIterable, Sendable {
        /// The operations with their NeuralNetwork.proto numbers: sqrt, rsqrt (1/sqrt(x + epsilon)), inverse (1/(x + epsilon)), power (x^alpha), exp, log, abs and threshold (max(x, alpha)).
        case sqrt = 0, rsqrt = 1, inverse = 2, power = 3, exp = 4, log = 5, abs = 6, threshold = 7

        /// The case name as written in Swift ("sqrt", "rsqrt", ...), for descriptions and logs.
        public var name: String { "\(self)" }
        var kind: ActivationKind {
            switch self {
            case .sqrt: return .sqrt
            case .rsqrt: return .rsqrt
            case .inverse: return .inverse
            case .power: return .power
            case .exp: return .exp
            case .log: return .log
            case .abs: return .abs
            case .threshold: return .threshold
            }
        }
    }

    /// Which function f is applied.
    public var operation: Operation
    /// The exponent for power and the threshold for threshold; unused by the other operations (default 0).
    public var alpha: Float
    /// Added before rsqrt and inverse to avoid division by zero; 1e-6 when the file gives 0.
    public var epsilon: Float
    /// Added to the scaled input before f (default 0).
    public var shift: Float
    /// Multiplies the input before f; 1 when the file gives 0.
    public var scale: Float

    /// The file's values: epsilon 0 means 1e-6 and scale 0 means 1, as NeuralNetwork.proto says.
    public init(_ operation: Operation, alpha: Float = 0, epsilon: Float = 0, shift: Float = 0, scale: Float = 0) {
        self.operation = operation
        self.alpha = alpha
        self.epsilon = epsilon == 0 ? 1e-6 : epsilon
        self.shift = shift
        self.scale = scale == 0 ? 1 : scale
    }

    /// The operation, its alpha for power and threshold, and the input scaling when not the identity, e.g. "power(2.0) of 0.5x+1.0".
    public var description: String {
        var s = operation.name
        if operation == .power || operation == .threshold { s += "(\(alpha))" }
        if scale != 1 || shift != 0 { s += " of \(scale)x\(shift < 0 ? "-" : "+")\(Swift.abs(shift))" }
        return s
    }
}
