import Foundation
import UpdraftCore

// Optimizers have no gradient to difference. Instead the reference update, applied step by step,
// is compared with the closed form of the documented formula after a few steps, computed
// independently of the element-wise loop.

extension GradientCheck {
    /// A 2x2 matrix acting on an element's optimizer state (w, v).
    struct Matrix2 {
        var a, b, c, d: Double  // [[a, b], [c, d]]
        static let identity = Matrix2(a: 1, b: 0, c: 0, d: 1)
        static func * (x: Matrix2, y: Matrix2) -> Matrix2 {
            Matrix2(a: x.a * y.a + x.b * y.c, b: x.a * y.b + x.b * y.d, c: x.c * y.a + x.d * y.c, d: x.c * y.b + x.d * y.d)
        }
        static func + (x: Matrix2, y: Matrix2) -> Matrix2 { Matrix2(a: x.a + y.a, b: x.b + y.b, c: x.c + y.c, d: x.d + y.d) }
        func apply(_ p: Double, _ q: Double) -> (Double, Double) { (a * p + b * q, c * p + d * q) }
    }

    /// SGD with a constant gradient g is linear in the state s = (w, v):
    ///   v' = momentum v + g + decay w,  w' = w - lr v'   =>   s' = A s + c,
    ///   A = [[1 - lr decay, -lr momentum], [decay, momentum]],  c = (-lr g, g),
    /// so after t steps s_t = A^t s_0 + (I + A + … + A^(t-1)) c.
    static func sgdRows(_ h: SGDHyperparameters, count: Int, steps: Int, name: String,
                        rng: inout SplitMix64) throws -> [ComparisonRow] {
        guard steps >= 1, count >= 0 else {
            throw UpdraftError(.invalidArgument, "SGD check needs at least one step and a non-negative count")
        }
        let w0 = uniform(count, -1...1, &rng), v0 = uniform(count, -0.5...0.5, &rng), g = uniform(count, -1...1, &rng)
        var w = w0, v = v0
        for _ in 0..<steps { try Reference.sgdStep(h, parameter: &w, gradient: g, velocity: &v) }

        let (lr, momentum, decay) = (Double(h.learningRate), Double(h.momentum), Double(h.weightDecay))
        let A = Matrix2(a: 1 - lr * decay, b: -lr * momentum, c: decay, d: momentum)
        var power = Matrix2.identity, series = Matrix2(a: 0, b: 0, c: 0, d: 0)
        for _ in 0..<steps { series = series + power; power = power * A }  // series = I + … + A^(t-1), power = A^t
        var wExpected = [Double](repeating: 0, count: count), vExpected = wExpected
        for i in 0..<count {
            let (pw, pv) = power.apply(w0[i], v0[i])
            let (cw, cv) = series.apply(-lr * g[i], g[i])
            wExpected[i] = pw + cw
            vExpected[i] = pv + cv
        }
        return [ComparisonRow(op: "sgd", caseName: name, quantity: "w",
                              error: ComparisonError(got: w, reference: wExpected, tolerance: tolerance)),
                ComparisonRow(op: "sgd", caseName: name, quantity: "v",
                              error: ComparisonError(got: v, reference: vExpected, tolerance: tolerance))]
    }

    /// Adam from zero moments with a constant gradient g and no weight decay: m_t = (1 - b1^t) g and
    /// v_t = (1 - b2^t) g², so the bias-corrected moments are exactly g and g², and every step moves w by
    /// lr g / (|g| + eps): w_t = w_0 - t lr g / (|g| + eps). With weight decay the gradient changes with w,
    /// so only the first step is checked: g' = g + decay w_0, m_1 = (1 - b1) g', v_1 = (1 - b2) g'²,
    /// w_1 = w_0 - lr g' / (|g'| + eps).
    static func adamRows(_ h: AdamHyperparameters, count: Int, steps: Int, name: String,
                         rng: inout SplitMix64) throws -> [ComparisonRow] {
        guard steps >= 1, count >= 0 else {
            throw UpdraftError(.invalidArgument, "Adam check needs at least one step and a non-negative count")
        }
        let (lr, b1, b2, eps, decay) = (Double(h.learningRate), Double(h.beta1), Double(h.beta2),
                                        Double(h.eps), Double(h.weightDecay))
        let checkedSteps = decay == 0 ? steps : 1
        let w0 = uniform(count, -1...1, &rng), g = uniform(count, -1...1, &rng)
        var w = w0, m = [Double](repeating: 0, count: count), v = m
        for t in 1...checkedSteps { try Reference.adamStep(h, step: t, parameter: &w, gradient: g, m: &m, v: &v) }

        var wExpected = w0, mExpected = w0, vExpected = w0
        let t = Double(checkedSteps)
        for i in 0..<count {
            let gi = g[i] + decay * w0[i]  // decay only enters when checkedSteps == 1
            mExpected[i] = (1 - pow(b1, t)) * gi
            vExpected[i] = (1 - pow(b2, t)) * gi * gi
            wExpected[i] = w0[i] - t * lr * gi / (abs(gi) + eps)
        }
        let note = checkedSteps < steps ? "weight decay: first step only" : nil
        return [ComparisonRow(op: "adam", caseName: name, quantity: "w",
                              error: ComparisonError(got: w, reference: wExpected, tolerance: tolerance), note: note),
                ComparisonRow(op: "adam", caseName: name, quantity: "m",
                              error: ComparisonError(got: m, reference: mExpected, tolerance: tolerance), note: note),
                ComparisonRow(op: "adam", caseName: name, quantity: "v",
                              error: ComparisonError(got: v, reference: vExpected, tolerance: tolerance), note: note)]
    }
}
