// SGD and Adam's fused steps in the verification tools. They have no gradient to difference: the
// finite-difference tool checks the reference update against the documented formula's closed form
// (GradientCheck+Optimizers.swift), and a backend's steps are compared with the reference's, a new
// gradient each step, the reference keeping its state in Double.
import UpdraftCore

/// `steps` SGD steps on a tensor of `count` parameters.
public struct SGDCase: VerifiedOp {
    public var hyperparameters: SGDHyperparameters
    public var count: Int
    public var steps: Int

    public var opName: String { "sgd" }
    public var summary: String {
        let h = hyperparameters
        return "×\(count) \(steps) step\(steps == 1 ? "" : "s") lr \(h.learningRate) momentum \(h.momentum) decay \(h.weightDecay)"
    }

    public func gradientProblem(rng: inout SplitMix64) throws -> GradientCheck.Problem? { nil }

    public func gradientRows(_ c: OpCase, rng: inout SplitMix64) throws -> [ComparisonRow] {
        try GradientCheck.sgdRows(hyperparameters, count: count, steps: steps, name: c.name, rng: &rng)
    }

    public func compare(in s: inout ComparisonSession) throws {
        let w0 = s.values(count), v0 = s.values(count, -0.1...0.1)
        let wb = try s.upload(w0), vb = try s.upload(v0)
        var w = asDouble(w0), v = asDouble(v0)
        for _ in 0..<steps {
            let g = s.values(count)
            try s.backend.sgdStep(hyperparameters, parameter: wb, gradient: try s.upload(g), velocity: vb, count: count)
            try Reference.sgdStep(hyperparameters, parameter: &w, gradient: asDouble(g), velocity: &v)
        }
        try s.record("w", wb, w)
        try s.record("v", vb, v)
    }
}

/// `steps` Adam steps on a tensor of `count` parameters.
public struct AdamCase: VerifiedOp {
    public var hyperparameters: AdamHyperparameters
    public var count: Int
    public var steps: Int

    public var opName: String { "adam" }
    public var summary: String {
        let h = hyperparameters
        return "×\(count) \(steps) step\(steps == 1 ? "" : "s") lr \(h.learningRate) b1 \(h.beta1) b2 \(h.beta2) decay \(h.weightDecay)"
    }

    public func gradientProblem(rng: inout SplitMix64) throws -> GradientCheck.Problem? { nil }

    public func gradientRows(_ c: OpCase, rng: inout SplitMix64) throws -> [ComparisonRow] {
        try GradientCheck.adamRows(hyperparameters, count: count, steps: steps, name: c.name, rng: &rng)
    }

    public func compare(in s: inout ComparisonSession) throws {
        let w0 = s.values(count)
        let zeros = [Float](repeating: 0, count: count)
        let wb = try s.upload(w0), mb = try s.upload(zeros), vb = try s.upload(zeros)
        var w = asDouble(w0), m = asDouble(zeros), v = asDouble(zeros)
        for step in 1...max(steps, 1) {
            let g = s.values(count)
            try s.backend.adamStep(hyperparameters, step: step, parameter: wb, gradient: try s.upload(g), m: mb, v: vb, count: count)
            try Reference.adamStep(hyperparameters, step: step, parameter: &w, gradient: asDouble(g), m: &m, v: &v)
        }
        try s.record("w", wb, w)
        try s.record("m", mb, m)
        try s.record("v", vb, v)
    }
}

extension VerifiedOp where Self == SGDCase {
    public static func sgd(_ h: SGDHyperparameters, count: Int, steps: Int) -> SGDCase {
        SGDCase(hyperparameters: h, count: count, steps: steps)
    }
}

extension VerifiedOp where Self == AdamCase {
    public static func adam(_ h: AdamHyperparameters, count: Int, steps: Int) -> AdamCase {
        AdamCase(hyperparameters: h, count: count, steps: steps)
    }
}
