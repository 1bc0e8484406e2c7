import Updraft

/// FLOPs per image of one training step, from the op descriptions, counted the way the executor
/// runs the step: the frozen prefix forward (fused ReLUs skipped), the tail forward, and of the
/// tail's backward only what is computed — weight gradients of updatable layers and input gradients
/// of blobs that carry one (`TrainingGraph.gradientBlobs`).
struct StepWork: Codable {
    var batch: Int
    /// Frozen prefix, forward only.
    var prefixForward: Double
    var tailForward: Double
    /// Tail backward as executed.
    var tailBackward: Double
    /// Weight (and bias) gradients of the updatable layers, part of `tailBackward`.
    var weightGradients: Double
    /// `TrainingGraph.stepCost` (prefix + tail), which counts every tail layer's full backward.
    var stepCost: Double

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
        case stepCost = "training_graph_step_cost_flop"
    }

    init(training: TrainingGraph, batch: Int) throws {
        self.batch = batch
        let per = 1 / Double(batch)
        let fused = training.fusedActivationNames
        var prefix = 0.0
        for l in training.prefix where !fused.contains(l.name) {
            prefix += try LayerCost.forward(l, batch: batch).flops
        }
        var forward = 0.0, backward = 0.0, weights = 0.0
        for l in training.tail {
            if !fused.contains(l.name) { forward += try LayerCost.forward(l, batch: batch).flops }
            let wantsInput = l.inputs.contains { training.gradientBlobs.contains($0) }
            switch l.op {
            case .convolution:
                guard let g = try l.convolutionGeometry(batch: batch) else { continue }
                if l.isUpdatable { weights += g.backwardWeightsCost.flops }
                if wantsInput { backward += g.backwardDataCost.flops }
            case .innerProduct:
                guard let g = try l.innerProductGeometry(batch: batch) else { continue }
                // backwardCost covers the input and weight gradients, the same GEMM size each.
                let half = g.backwardCost.flops / 2
                if l.isUpdatable { weights += half }
                if wantsInput { backward += half }
            default:
                if wantsInput { backward += try LayerCost.backward(l, batch: batch).flops }
            }
        }
        let cost = try training.stepCost(batch: batch)
        prefixForward = prefix * per
        tailForward = forward * per
        tailBackward = (backward + weights) * per
        weightGradients = weights * per
        stepCost = (cost.prefix.flops + cost.tail.flops) * per
    }

    /// One line for the table output.
    var summary: String {
        func g(_ v: Double) -> String { String(format: "%.3f", v / 1e9) }
        return "work per image (batch \(batch)): frozen forward \(g(prefixForward)) GFLOP, tail forward \(g(tailForward)), "
            + "tail backward \(g(tailBackward)) (weight gradients \(g(weightGradients))); "
            + "full step \(g(fullStep)) GFLOP, cached step \(g(cachedStep)) GFLOP "
            + "(TrainingGraph.stepCost: \(g(stepCost)), which also counts input gradients the executor skips)"
    }
}
