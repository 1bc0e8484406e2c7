// What the families' finite-difference problems share (each family's problem is its
// `VerifiedOp.gradientProblem`, in its OpCase+<Family>.swift): fused epilogues and inputs drawn away
// from kinks.
import UpdraftCore

extension GradientCheck {
    /// y = f(z), or z without an epilogue.
    static func applyEpilogue(_ a: Activation?, _ g: ActivationGeometry, _ z: [Double]) throws -> [Double] {
        guard let a else { return z }
        return try Reference.activationForward(a, g, input: z)
    }

    /// dL/dz through the epilogue y = f(z).
    static func epilogueGradient(_ a: Activation?, _ g: ActivationGeometry, _ z: [Double], _ dy: [Double]) throws -> [Double] {
        guard let a else { return dy }
        return try Reference.activationBackward(a, g, input: z, output: try Reference.activationForward(a, g, input: z), outputGradient: dy)
    }

    /// Throws when a pre-activation lies within 1e-4 of a kink of the epilogue (the finite difference
    /// would straddle it): the case needs other sizes or a different name to draw other data.
    static func requireAwayFromKinks(_ a: Activation?, _ z: [Double]) throws {
        guard let a else { return }
        for k in a.kinks {
            if let near = z.first(where: { abs($0 - k) < 1e-4 }) {
                throw UpdraftError(.data, "a pre-activation (\(near)) lies within 1e-4 of the \(a) kink at \(k)",
                                   hint: "rename the case or change its sizes to draw other data")
            }
        }
    }

    /// Inputs in the function's verification range, at least 0.05 from every kink (redrawn when closer).
    static func awayFromKinks(_ a: Activation, count: Int, _ rng: inout SplitMix64) -> [Double] {
        let range = a.verificationRange(), kinks = a.kinks
        return (0..<count).map { _ in
            var v = 0.0
            repeat { v = range.lowerBound + (range.upperBound - range.lowerBound) * rng.nextDouble() }
            while kinks.contains(where: { abs(v - $0) < 0.05 })
            return v
        }
    }
}
