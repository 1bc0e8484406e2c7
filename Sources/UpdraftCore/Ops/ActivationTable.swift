import Foundation

/// THE activation table: each element-wise function's code (its raw value, written only here), its
/// float forward and derivative (the CPU fast path and the fused CPU epilogues run exactly these),
/// and the `-D` defines (`openCLDefines`) every OpenCL program is built with, so the kernels'
/// `switch (kind)` (Kernels/activation.h) uses the same codes. Code 0 (ACT_NONE) means no function.
///
/// With p = (a, b, c, d) from `ActivationScalars` (per-channel kinds: a, b of the element's channel)
/// and u = c * x + d for the unary functions:
///
///   kind                forward                      derivative dy/dx (reads y, unless marked x)
///   linear              a x + b                      a
///   relu                max(x, 0) (x > 0)            y > 0
///   leakyReLU, prelu    x > 0 ? x : a x              v > 0 ? 1 : a      (v = y when a >= 0, else x)
///   thresholdedReLU     x >= a ? x : 0               y > 0 (a >= 0) | x >= a
///   tanh                tanh x                       1 - y²
///   scaledTanh          a tanh(b x)                  a b (1 - (y/a)²)   (0 when a = 0)
///   sigmoid             1 / (1 + e^-x)               y (1 - y)
///   sigmoidHard         min(max(a x + b, 0), 1)      0 < y < 1 ? a : 0
///   elu                 x > 0 ? x : a (e^x - 1)      y > 0 ? 1 : y + a (a >= 0) | x > 0 ? 1 : a e^x
///   softsign            x / (1 + |x|)                (1 - |y|)²
///   softplus            log(1 + e^x)                 1 - e^-y
///   parametricSoftplus  a log(1 + e^(b x))           a b (1 - e^(-y/a)) (0 when a = 0)
///   clip                min(max(x, a), b)            a < y < b
///   sqrt                sqrt u                       c / (2 y)
///   rsqrt               1 / sqrt(u + b)              -c y³ / 2
///   inverse             1 / (u + b)                  -c y²
///   power               u^a                          x: c a u^(a-1)
///   exp                 e^u                          c y
///   log                 log u                        x: c / u
///   abs                 |u|                          x: c sign(u)
///   threshold           max(u, a)                    y > a ? c : 0
public enum ActivationKind: Int32, CaseIterable, Sendable {
    /// Core ML's ActivationParams functions (1-13), clip (14) and the UnaryFunctionLayerParams operations (15-22); the raw value is the code the kernels switch on.
    case linear = 1, relu = 2, leakyReLU = 3, thresholdedReLU = 4, prelu = 5, tanh = 6, scaledTanh = 7,
         sigmoid = 8, sigmoidHard = 9, elu = 10, softsign = 11, softplus = 12, parametricSoftplus = 13,
         clip = 14, sqrt = 15, rsqrt = 16, inverse = 17, power = 18, exp = 19, log = 20, abs = 21, threshold = 22

    /// The code kernels see when no function is fused.
    public static let noneCode: Int32 = 0

    /// The OpenCL define naming this kind's code: "ACT_" and the case name in capitals.
    public var defineName: String { "ACT_" + "\(self)".uppercased() }

    /// `-D` defines for every kernel program: ACT_NONE and each kind's ACT_* code.
    public static let openCLDefines: [String: String] = {
        var d = ["ACT_NONE": "\(noneCode)"]
        for k in allCases { d[k.defineName] = "\(k.rawValue)" }
        return d
    }()

    /// Whether the constants a and b come per channel.
    public var perChannel: Bool { self == .prelu || self == .parametricSoftplus }

    /// Whether the derivative comes from y (see `Activation.backwardReadsOutput`, which also looks at
    /// the constants for the ReLU-like kinds).
    public var derivativeFromOutput: Bool {
        switch self {
        case .power, .log, .abs: return false
        default: return true
        }
    }

    /// Whether the function calls exp/log/tanh/pow (smaller parallel chunks on the CPU).
    public var isTranscendental: Bool {
        switch self {
        case .linear, .relu, .leakyReLU, .thresholdedReLU, .prelu, .sigmoidHard, .softsign, .clip, .abs, .threshold: return false
        default: return true
        }
    }

    /// Rough FLOPs per element, for the cost model.
    public var flops: Int { isTranscendental ? 8 : 2 }

    /// y = f(x).
    // @inlinable: the CPU backend's loops (another target) call this per element and rely on it being
    // inlined and specialised for each function.
    @inlinable @inline(__always)
    public func forward(_ x: Float, _ p: ActivationScalars) -> Float {
        switch self {
        case .linear: return p.a * x + p.b
        case .relu: return x > 0 ? x : 0
        case .leakyReLU, .prelu: return x > 0 ? x : p.a * x
        case .thresholdedReLU: return x >= p.a ? x : 0
        case .tanh: return Foundation.tanh(x)
        case .scaledTanh: return p.a * Foundation.tanh(p.b * x)
        case .sigmoid: return 1 / (1 + Foundation.exp(-x))
        case .sigmoidHard: return Swift.min(Swift.max(p.a * x + p.b, 0), 1)
        case .elu: return x > 0 ? x : p.a * Foundation.expm1(x)
        case .softsign: return x / (1 + Swift.abs(x))
        case .softplus: return Self.softplus(x)
        case .parametricSoftplus: return p.a * Self.softplus(p.b * x)
        case .clip: return Swift.min(Swift.max(x, p.a), p.b)
        case .sqrt: return (p.c * x + p.d).squareRoot()
        case .rsqrt: return 1 / (p.c * x + p.d + p.b).squareRoot()
        case .inverse: return 1 / (p.c * x + p.d + p.b)
        case .power: return Foundation.pow(p.c * x + p.d, p.a)
        case .exp: return Foundation.exp(p.c * x + p.d)
        case .log: return Foundation.log(p.c * x + p.d)
        case .abs: return Swift.abs(p.c * x + p.d)
        case .threshold: return Swift.max(p.c * x + p.d, p.a)
        }
    }

    /// dy/dx from `v`, which is y when `fromOutput` (as `Activation.backwardReadsOutput` says) and x
    /// otherwise; dx = dy * derivative.
    @inlinable @inline(__always)
    public func derivative(_ v: Float, _ p: ActivationScalars, fromOutput: Bool) -> Float {
        switch self {
        case .linear: return p.a
        case .relu: return v > 0 ? 1 : 0
        case .leakyReLU, .prelu: return v > 0 ? 1 : p.a
        case .thresholdedReLU: return fromOutput ? (v > 0 ? 1 : 0) : (v >= p.a ? 1 : 0)
        case .tanh: return 1 - v * v
        case .scaledTanh:
            if p.a == 0 { return 0 }
            let t = v / p.a
            return p.a * p.b * (1 - t * t)
        case .sigmoid: return v * (1 - v)
        case .sigmoidHard: return v > 0 && v < 1 ? p.a : 0
        case .elu: return v > 0 ? 1 : (fromOutput ? v + p.a : p.a * Foundation.exp(v))
        case .softsign:
            let t = 1 - Swift.abs(v)
            return t * t
        case .softplus: return -Foundation.expm1(-v)
        case .parametricSoftplus: return p.a == 0 ? 0 : -p.a * p.b * Foundation.expm1(-v / p.a)
        case .clip: return v > p.a && v < p.b ? 1 : 0
        case .sqrt: return p.c / (2 * v)
        case .rsqrt: return -0.5 * p.c * v * v * v
        case .inverse: return -p.c * v * v
        case .power: return p.c * p.a * Foundation.pow(p.c * v + p.d, p.a - 1)
        case .exp: return p.c * v
        case .log: return p.c / (p.c * v + p.d)
        case .abs:
            let u = p.c * v + p.d
            return u > 0 ? p.c : (u < 0 ? -p.c : 0)
        case .threshold: return v > p.a ? p.c : 0
        }
    }

    /// log(1 + e^x) without overflow: max(x, 0) + log1p(e^-|x|).
    @usableFromInline @inline(__always)
    static func softplus(_ x: Float) -> Float { Swift.max(x, 0) + Foundation.log1p(Foundation.exp(-Swift.abs(x))) }
}
