// Softmax and the two losses in the verification tools: softmax over channels (forward and
// backward), fused softmax + cross-entropy, and mean squared error — each loss also asked for the
// loss alone, as evaluation passes ask.
import UpdraftCore

/// Softmax over channels, forward and backward.
public struct SoftmaxCase: VerifiedOp {
    public var geometry: SoftmaxGeometry

    public var opName: String { "softmax" }
    public var summary: String { "[\(geometry.batch), \(geometry.channels), \(geometry.spatial)]" }

    public func gradientProblem(rng: inout SplitMix64) throws -> GradientCheck.Problem? {
        let g = geometry
        return GradientCheck.Problem(inputs: [GradientCheck.Input("x", GradientCheck.uniform(g.count, -2...2, &rng))],
                                     forward: { v in try Reference.softmaxForward(g, input: v[0]) },
                                     backward: { v, dy in
            [try Reference.softmaxBackward(g, output: Reference.softmaxForward(g, input: v[0]), outputGradient: dy)]
        })
    }

    public func compare(in s: inout ComparisonSession) throws {
        let g = geometry
        let x = s.values(g.count, -4...4), dy = s.values(g.count)
        let y = try s.output(g.count)
        try s.backend.softmaxForward(g, input: try s.upload(x), output: y)
        let yRef = try Reference.softmaxForward(g, input: asDouble(x))
        try s.record("y", y, yRef)

        let dx = try s.output(g.count)
        try s.backend.softmaxBackward(g, output: try s.upload(asFloat(yRef)), outputGradient: try s.upload(dy), inputGradient: dx)
        try s.record("dx", dx, Reference.softmaxBackward(g, output: asDouble(asFloat(yRef)), outputGradient: asDouble(dy)))
    }
}

/// Fused softmax + cross-entropy on logits [batch, classes].
public struct SoftmaxCrossEntropyCase: VerifiedOp {
    public var batch: Int
    public var classes: Int

    public var opName: String { "softmaxCrossEntropy" }
    public var summary: String { "[\(batch), \(classes)]" }

    public func gradientProblem(rng: inout SplitMix64) throws -> GradientCheck.Problem? {
        let g = SoftmaxGeometry(batch: batch, channels: classes), classes = self.classes
        let labels = (0..<batch).map { _ in Double(rng.next() % UInt64(max(classes, 1))) }
        return GradientCheck.Problem(inputs: [GradientCheck.Input("z", GradientCheck.uniform(batch * classes, -2...2, &rng)),
                                              GradientCheck.Input("labels", labels, differentiable: false)],
                                     forward: { v in [try Reference.softmaxCrossEntropy(g, logits: v[0], labels: v[1]).loss] },
                                     backward: { v, dy in
            let dz = try Reference.softmaxCrossEntropy(g, logits: v[0], labels: v[1]).logitsGradient
            return [dz.map { $0 * dy[0] }, nil]
        })
    }

    public func compare(in s: inout ComparisonSession) throws {
        let g = SoftmaxGeometry(batch: batch, channels: classes)
        let z = s.values(batch * classes, -4...4), labels = s.labels(batch, classes: classes)
        let loss = try s.output(1), dz = try s.output(batch * classes), correct = try s.output(1)
        try s.backend.softmaxCrossEntropy(g, logits: try s.upload(z), labels: try s.upload(labels), loss: loss,
                                          logitsGradient: dz, correct: correct)
        let reference = try Reference.softmaxCrossEntropy(g, logits: asDouble(z), labels: asDouble(labels))
        try s.record("loss", loss, [reference.loss])
        try s.record("dz", dz, reference.logitsGradient)
        try s.record("correct", correct, [Double(reference.correct)], tolerance: .exact)
        // evaluation passes ask for the loss alone
        let lossOnly = try s.output(1)
        try s.backend.softmaxCrossEntropy(g, logits: try s.upload(z), labels: try s.upload(labels), loss: lossOnly,
                                          logitsGradient: nil, correct: nil)
        try s.record("loss alone", lossOnly, [reference.loss])
    }
}

/// Mean squared error loss over `count` values and its input gradient.
public struct MeanSquaredErrorCase: VerifiedOp {
    public var count: Int

    public var opName: String { "meanSquaredError" }
    public var summary: String { "×\(count)" }

    public func gradientProblem(rng: inout SplitMix64) throws -> GradientCheck.Problem? {
        GradientCheck.Problem(inputs: [GradientCheck.Input("x", GradientCheck.uniform(count, -1...1, &rng)),
                                       GradientCheck.Input("target", GradientCheck.uniform(count, -1...1, &rng), differentiable: false)],
                              forward: { v in [try Reference.meanSquaredError(input: v[0], target: v[1]).loss] },
                              backward: { v, dy in
            [try Reference.meanSquaredError(input: v[0], target: v[1]).inputGradient.map { $0 * dy[0] }, nil]
        })
    }

    public func compare(in s: inout ComparisonSession) throws {
        let x = s.values(count), t = s.values(count)
        let loss = try s.output(1), dx = try s.output(count)
        try s.backend.meanSquaredError(count: count, input: try s.upload(x), target: try s.upload(t), loss: loss, inputGradient: dx)
        let reference = try Reference.meanSquaredError(input: asDouble(x), target: asDouble(t))
        try s.record("loss", loss, [reference.loss])
        try s.record("dx", dx, reference.inputGradient)
        let lossOnly = try s.output(1)
        try s.backend.meanSquaredError(count: count, input: try s.upload(x), target: try s.upload(t), loss: lossOnly,
                                       inputGradient: nil)
        try s.record("loss alone", lossOnly, [reference.loss])
    }
}

extension VerifiedOp where Self == SoftmaxCase {
    public static func softmax(_ g: SoftmaxGeometry) -> SoftmaxCase { SoftmaxCase(geometry: g) }
}

extension VerifiedOp where Self == SoftmaxCrossEntropyCase {
    public static func softmaxCrossEntropy(batch: Int, classes: Int) -> SoftmaxCrossEntropyCase {
        SoftmaxCrossEntropyCase(batch: batch, classes: classes)
    }
}

extension VerifiedOp where Self == MeanSquaredErrorCase {
    public static func meanSquaredError(count: Int) -> MeanSquaredErrorCase { MeanSquaredErrorCase(count: count) }
}
