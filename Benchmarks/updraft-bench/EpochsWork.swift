import Updraft

/// FLOPs per image of one training step, as `TrainingGraph.stepCost` counts them: the frozen prefix
/// forward (fused ReLUs skipped), the tail forward, and of the tail's backward only what the executor
/// computes — weight gradients of updatable layers and input gradients of blobs that carry one.
struct StepWork: Codable {
    var batch: Int
    /// Frozen prefix, forward only.
    var prefixForward: Double
    var tailForward: Double
    /// Tail backward as executed.
    var tailBackward: Double
    /// Weight (and bias) gradients of the updatable layers, part of `tailBackward`.
    var weightGradients: Double

    /// A step through the whole network (no feature cache, or an example not cached yet).
    var fullStep: Double { prefixForward + tailForward + tailBackward }
    /// A step on cached boundary features: the tail only.
    var cachedStep: Double { tailForward + tailBackward }

    enum CodingKeys: String, CodingKey {
        case batch
        case prefixForward = "prefix_forward_flop"
        case tailForward = "tail_forward_flop"
        case tailBackward = "tail_backward_flop"
        case weightGradients = "weight_gradient_flop"
    }

    init(training: TrainingGraph, batch: Int) throws {
        self.batch = batch
        let per = 1 / Double(batch)
        let cost = try training.stepCost(batch: batch)
        prefixForward = cost.prefixForward.flops * per
        tailForward = cost.tailForward.flops * per
        tailBackward = (cost.tailBackwardData.flops + cost.weightGradients.flops) * per
        weightGradients = cost.weightGradients.flops * per
    }

    /// One line for the table output.
    var summary: String {
        func g(_ v: Double) -> String { String(format: "%.3f", v / 1e9) }
        return "work per image (batch \(batch)): frozen forward \(g(prefixForward)) GFLOP, tail forward \(g(tailForward)), "
            + "tail backward \(g(tailBackward)) (weight gradients \(g(weightGradients))); "
            + "full step \(g(fullStep)) GFLOP, cached step \(g(cachedStep)) GFLOP"
    }
}
