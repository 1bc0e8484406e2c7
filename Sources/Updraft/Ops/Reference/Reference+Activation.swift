// Element-wise activations (Core ML ActivationParams), x, y, dy, dx all of one length.
//
//   relu:        y = max(0, x)               dx = dy if x > 0 else 0
//   leakyReLU:   y = x if x > 0 else a*x     dx = dy if x > 0 else a*dy
//   sigmoid:     y = 1 / (1 + exp(-x))       dx = dy * y * (1 - y)
//   tanh:        y = tanh(x)                 dx = dy * (1 - y^2)
//   linear:      y = a*x + b                 dx = a * dy
// At x = 0 ReLU and leaky ReLU take the "x <= 0" branch.

import Foundation

extension Reference {
    /// x [count] -> y [count].
    public static func activationForward(_ a: Activation, input x: [Double]) -> [Double] {
        var y = [Double](repeating: 0, count: x.count)
        for i in 0..<x.count {
            let v = x[i]
            switch a {
            case .relu: y[i] = v > 0 ? v : 0
            case let .leakyReLU(alpha): y[i] = v > 0 ? v : Double(alpha) * v
            case .sigmoid: y[i] = 1 / (1 + exp(-v))
            case .tanh: y[i] = Foundation.tanh(v)
            case let .linear(alpha, beta): y[i] = Double(alpha) * v + Double(beta)
            }
        }
        return y
    }

    /// x, y (the forward output), dy [count] -> dx [count]. ReLU, leaky ReLU and linear read x;
    /// sigmoid and tanh read y.
    public static func activationBackward(_ a: Activation, input x: [Double], output y: [Double],
                                          outputGradient dy: [Double]) throws -> [Double] {
        try require(y, count: x.count, "activation output")
        try require(dy, count: x.count, "activation output gradient")
        var dx = [Double](repeating: 0, count: x.count)
        for i in 0..<x.count {
            switch a {
            case .relu: dx[i] = x[i] > 0 ? dy[i] : 0
            case let .leakyReLU(alpha): dx[i] = x[i] > 0 ? dy[i] : Double(alpha) * dy[i]
            case .sigmoid: dx[i] = dy[i] * y[i] * (1 - y[i])
            case .tanh: dx[i] = dy[i] * (1 - y[i] * y[i])
            case let .linear(alpha, _): dx[i] = Double(alpha) * dy[i]
            }
        }
        return dx
    }
}
