// What the verification tools need to know about an element-wise function: where to draw its inputs
// (inside the domain of sqrt, log, …) and where its derivative jumps (finite differences must not
// straddle a kink).
import UpdraftCore

extension Activation {
    /// Inputs to test on: for the functions defined only for positive u = scale * x + shift (sqrt,
    /// rsqrt, inverse, power, log) the x whose u lies in [0.5, 3]; else [-3, 3] (`wide`) or [-2, 2].
    public func verificationRange(wide: Bool = false) -> ClosedRange<Double> {
        if case let .unary(f) = self, [.sqrt, .rsqrt, .inverse, .power, .log].contains(f.operation) {
            let a = (0.5 - Double(f.shift)) / Double(f.scale), b = (3 - Double(f.shift)) / Double(f.scale)
            return min(a, b)...max(a, b)
        }
        return wide ? -3...3 : -2...2
    }

    /// The inputs x where the derivative jumps.
    public var kinks: [Double] {
        switch self {
        case .relu, .leakyReLU, .prelu, .elu: return [0]
        case let .thresholdedReLU(a): return [Double(a), 0]
        case let .sigmoidHard(a, b): return a == 0 ? [] : [-Double(b) / Double(a), (1 - Double(b)) / Double(a)]
        case let .clip(lo, hi): return [Double(lo), Double(hi)]
        case let .unary(f):
            switch f.operation {
            case .abs: return [-Double(f.shift) / Double(f.scale)]
            case .threshold: return [(Double(f.alpha) - Double(f.shift)) / Double(f.scale)]
            default: return []
            }
        default: return []
        }
    }
}
