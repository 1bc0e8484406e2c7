import UpdraftCore
import UpdraftBackends
import UpdraftModel

/// Concatenation of every input along channels (`Backend.concat*`). Convolutions that feed a concat
/// may write their slice of its output directly (`TrainingGraph.concatSlices`); the concat then never runs.
enum ConcatLayer: LayerKind {
    static func kernelFamilies(_ op: LayerOp) -> [KernelFamily] { [.concat] }
    static func computesEachImageAlone(_ op: LayerOp) -> Bool { true }

    static func forward(_ c: ForwardCall) throws {
        try c.backend.concatForward(c.inputs, channels: c.layer.inputShapes.map(\.c), batch: c.batch,
                                    spatial: c.layer.outputShape.h * c.layer.outputShape.w, output: c.output)
    }

    static func backward(_ c: BackwardCall) throws {
        let parts = try c.layer.inputs.indices.map { try c.newInputGradient($0) }
        try c.backend.concatBackward(c.outputGradient, channels: c.layer.inputShapes.map(\.c), batch: c.batch,
                                     spatial: c.layer.outputShape.h * c.layer.outputShape.w, inputGradients: parts)
        for (i, part) in parts.enumerated() {
            if c.wantsInput[i] { try c.addInputGradient(i, part) } else { c.ws.release(part, from: c.backend) }
        }
    }

    static func work(_ layer: GraphLayer, batch: Int, optimizer: OptimizerKind,
                     backwardData: Bool, backwardWeights: Bool) throws -> LayerWork {
        // One pass that reads every input and writes the output (and the reverse for gradients).
        .copy(count: layer.outputShape.withBatch(batch).count, backwardData: backwardData)
    }
}
