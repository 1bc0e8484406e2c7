import UpdraftCore
import UpdraftBackends
import UpdraftModel

/// Element-wise sum or product of every input (same shapes), folded pairwise with `Backend.elementwise`.
enum ElementwiseLayer: LayerKind {
    static func kernelFamilies(_ op: LayerOp) -> [KernelFamily] { [.elementwise] }
    static func computesEachImageAlone(_ op: LayerOp) -> Bool { true }

    private static func operation(_ op: LayerOp) -> ElementwiseOp {
        if case .add = op { return .add } else { return .multiply }
    }

    static func forward(_ c: ForwardCall) throws {
        let op = operation(c.layer.op)
        let y = c.output
        try c.backend.elementwise(op, c.inputs[0], c.inputs[1], output: y, count: y.count)
        for extra in c.inputs.dropFirst(2) { try c.backend.elementwise(op, y, extra, output: y, count: y.count) }
    }

    static func backward(_ c: BackwardCall) throws {
        switch operation(c.layer.op) {
        case .add:
            for i in c.layer.inputs.indices where c.wantsInput[i] {
                let dx = try c.newInputGradient(i)
                try c.backend.copy(c.outputGradient, to: dx)
                try c.addInputGradient(i, dx)
            }
        case .multiply:
            guard c.layer.inputs.count == 2 else {
                throw UpdraftError(.unsupported, "backward through multiply layer '\(c.layer.name)' with \(c.layer.inputs.count) inputs",
                                   hint: "Updraft back-propagates through two-input multiply layers")
            }
            for i in 0..<2 where c.wantsInput[i] {
                let dx = try c.newInputGradient(i)
                try c.backend.elementwise(.multiply, c.outputGradient, try c.input(1 - i), output: dx, count: dx.count)
                try c.addInputGradient(i, dx)
            }
        }
    }

    static func work(_ layer: GraphLayer, batch: Int, optimizer: OptimizerKind,
                     backwardData: Bool, backwardWeights: Bool) throws -> LayerWork {
        // Folded pairwise: k inputs take k - 1 kernels; each input gets its own gradient kernel.
        let count = layer.outputShape.withBatch(batch).count
        let k = max(1, layer.inputs.count)
        let pass = KernelWork(OpCost(flops: Double(count), bytes: f32Bytes(count, count, count)))
        var w = LayerWork()
        w.forward = Array(repeating: pass, count: max(1, k - 1))
        if backwardData { w.backwardData = Array(repeating: pass, count: k) }
        return w
    }
}
