// Element-wise activations, clip and unary functions in Double (the definition), x, y, dy, dx of
// `g.count` values laid out [batch, channels, spatial]; per-channel constants (PReLU, parametric
// softplus) indexed by channel. Backward reads y or x as `Activation.backwardReadsOutput` says, with
// the closed forms listed in ActivationTable.swift; at kinks (x = 0 for ReLU, leaky ReLU, PReLU, ELU;
// the clip and hard-sigmoid edges) the derivative is the one of the flat or lower side.

import Foundation

extension Reference {
    /// x -> y, one channel of `x.count` values (functions without per-channel constants, or a single one).
    public static func activationForward(_ a: Activation, input x: [Double]) throws -> [Double] {
        try activationForward(a, ActivationGeometry(count: x.count), input: x)
    }

    /// x -> y over [batch, channels, spatial], per-channel constants indexed by channel. Throws `UpdraftError` (`.invalidArgument`) if `x.count` is not `g.count` or the activation's constants do not fit `g.channels`.
    public static func activationForward(_ a: Activation, _ g: ActivationGeometry, input x: [Double]) throws -> [Double] {
        try require(x, count: g.count, "activation input")
        let table = try constants(a, g)
        var y = [Double](repeating: 0, count: x.count)
        for i in 0..<x.count {
            let (p, q) = table(i)
            y[i] = forward(a, x[i], p, q)
        }
        return y
    }

    /// x, y (the forward output), dy -> dx, one channel.
    public static func activationBackward(_ a: Activation, input x: [Double], output y: [Double],
                                          outputGradient dy: [Double]) throws -> [Double] {
        try activationBackward(a, ActivationGeometry(count: x.count), input: x, output: y, outputGradient: dy)
    }

    /// x, y, dy -> dx. Reads only y when `a.backwardReadsOutput` (x may then be anything of the right length).
    public static func activationBackward(_ a: Activation, _ g: ActivationGeometry, input x: [Double], output y: [Double],
                                          outputGradient dy: [Double]) throws -> [Double] {
        try require(x, count: g.count, "activation input")
        try require(y, count: g.count, "activation output")
        try require(dy, count: g.count, "activation output gradient")
        let table = try constants(a, g)
        let fromY = a.backwardReadsOutput
        var dx = [Double](repeating: 0, count: x.count)
        for i in 0..<x.count {
            let (p, q) = table(i)
            dx[i] = dy[i] * derivative(a, fromY ? y[i] : x[i], p, q, fromOutput: fromY)
        }
        return dx
    }

    /// The (alpha, beta) of element i: per channel for PReLU and parametric softplus, else the scalars.
    private static func constants(_ a: Activation, _ g: ActivationGeometry) throws -> (Int) -> (Double, Double) {
        try a.validate(channels: g.channels)
        guard let c = try a.channelConstants(channels: g.channels) else {
            let s = a.scalars
            return { _ in (Double(s.a), Double(s.b)) }
        }
        let channels = g.channels, spatial = max(g.spatial, 1)
        return { i in let ch = (i / spatial) % channels; return (Double(c[ch]), Double(c[channels + ch])) }
    }

    private static func softplus(_ x: Double) -> Double { max(x, 0) + log1p(exp(-abs(x))) }

    private static func forward(_ a: Activation, _ x: Double, _ p: Double, _ q: Double) -> Double {
        switch a {
        case let .linear(alpha, beta): return Double(alpha) * x + Double(beta)
        case .relu: return x > 0 ? x : 0
        case let .leakyReLU(alpha): return x > 0 ? x : Double(alpha) * x
        case let .thresholdedReLU(alpha): return x >= Double(alpha) ? x : 0
        case .prelu: return x > 0 ? x : p * x
        case .tanh: return Foundation.tanh(x)
        case let .scaledTanh(alpha, beta): return Double(alpha) * Foundation.tanh(Double(beta) * x)
        case .sigmoid: return 1 / (1 + exp(-x))
        case let .sigmoidHard(alpha, beta): return min(max(Double(alpha) * x + Double(beta), 0), 1)
        case let .elu(alpha): return x > 0 ? x : Double(alpha) * (exp(x) - 1)
        case .softsign: return x / (1 + abs(x))
        case .softplus: return softplus(x)
        case .parametricSoftplus: return p * softplus(q * x)
        case let .clip(lo, hi): return min(max(x, Double(lo)), Double(hi))
        case let .unary(f):
            let u = Double(f.scale) * x + Double(f.shift), alpha = Double(f.alpha), eps = Double(f.epsilon)
            switch f.operation {
            case .sqrt: return u.squareRoot()
            case .rsqrt: return 1 / (u + eps).squareRoot()
            case .inverse: return 1 / (u + eps)
            case .power: return pow(u, alpha)
            case .exp: return exp(u)
            case .log: return log(u)
            case .abs: return abs(u)
            case .threshold: return max(u, alpha)
            }
        }
    }

    /// dy/dx from v (y when fromOutput, else x).
    private static func derivative(_ a: Activation, _ v: Double, _ p: Double, _ q: Double, fromOutput: Bool) -> Double {
        switch a {
        case let .linear(alpha, _): return Double(alpha)
        case .relu: return v > 0 ? 1 : 0
        case let .leakyReLU(alpha): return v > 0 ? 1 : Double(alpha)
        case .prelu: return v > 0 ? 1 : p
        case let .thresholdedReLU(alpha): return fromOutput ? (v > 0 ? 1 : 0) : (v >= Double(alpha) ? 1 : 0)
        case .tanh: return 1 - v * v
        case let .scaledTanh(alpha, beta):
            let s = Double(alpha), t = Double(beta)
            return s == 0 ? 0 : s * t * (1 - (v / s) * (v / s))
        case .sigmoid: return v * (1 - v)
        case let .sigmoidHard(alpha, _): return v > 0 && v < 1 ? Double(alpha) : 0
        case let .elu(alpha):
            if v > 0 { return 1 }
            return fromOutput ? v + Double(alpha) : Double(alpha) * exp(v)
        case .softsign: return (1 - abs(v)) * (1 - abs(v))
        case .softplus: return 1 - exp(-v)
        case .parametricSoftplus: return p == 0 ? 0 : p * q * (1 - exp(-v / p))
        case let .clip(lo, hi): return v > Double(lo) && v < Double(hi) ? 1 : 0
        case let .unary(f):
            let scale = Double(f.scale), alpha = Double(f.alpha)
            switch f.operation {
            case .sqrt: return scale / (2 * v)
            case .rsqrt: return -0.5 * scale * v * v * v
            case .inverse: return -scale * v * v
            case .power: return scale * alpha * pow(scale * v + Double(f.shift), alpha - 1)
            case .exp: return scale * v
            case .log: return scale / (scale * v + Double(f.shift))
            case .abs:
                let u = scale * v + Double(f.shift)
                return u > 0 ? scale : (u < 0 ? -scale : 0)
            case .threshold: return v > alpha ? scale : 0
            }
        }
    }
}
