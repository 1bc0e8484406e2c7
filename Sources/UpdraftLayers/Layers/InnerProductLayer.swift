import UpdraftCore
import UpdraftModel
import UpdraftBackends

/// Inner product on the flattened input: one GEMM forward, one for each gradient (`Backend.innerProduct*`).
enum InnerProductLayer: LayerKind {
    static let acceptsEpilogue = true

    static func forward(_ c: ForwardCall) throws {
        let p = c.parameters
        try c.backend.innerProductForward(try c.layer.innerProductGeometry(batch: c.batch)!, input: c.inputs[0], weights: p.weights!,
                                          bias: p.bias, output: c.output, epilogue: c.epilogue)
    }

    static func backward(_ c: BackwardCall) throws {
        let g = try c.layer.innerProductGeometry(batch: c.batch)!
        try c.weightedBackward(parameters: { dw, db in
            try c.backend.innerProductBackwardWeights(g, input: try c.input(0), outputGradient: c.outputGradient,
                                                      weightGradient: dw, biasGradient: db)
        }, input: { dx in
            try c.backend.innerProductBackwardData(g, outputGradient: c.outputGradient, weights: c.parameters.weights!, inputGradient: dx)
        })
    }

    static func prepare(_ c: PrepareCall) throws -> Int {
        try c.backend.prepareInnerProduct(try c.layer.innerProductGeometry(batch: c.batch)!, passes: c.passes)
    }

    static func engine(_ layer: GraphLayer, batch: Int, backward: Bool, inputGradient: Bool, on backend: Backend) -> String {
        switch backend.innermost {
        case let cpu as CPUBackend:
            guard let g = try? layer.innerProductGeometry(batch: batch) else { return "none" }
            return cpu.opEngineName(.innerProduct(g), backward: backward, inputGradient: inputGradient)
        case let ocl as OpenCLBackend:
            guard let g = try? layer.innerProductGeometry(batch: batch) else { return "none" }
            let forward = GemmOperation(m: g.batch, n: g.outputChannels, k: g.inputChannels, transB: true)
            return ocl.tuning.variant(for: KernelShape(forward))?.description ?? "in-house table tiling"
        default: return "reference"
        }
    }

    static func work(_ layer: GraphLayer, batch: Int, optimizer: OptimizerKind,
                     backwardData: Bool, backwardWeights: Bool) throws -> LayerWork {
        var w = LayerWork()
        guard let g = try layer.innerProductGeometry(batch: batch) else { return w }
        let macs = Double(g.batch) * Double(g.inputChannels) * Double(g.outputChannels)
        let x = g.batch * g.inputChannels, y = g.batch * g.outputChannels, wc = g.inputChannels * g.outputChannels
        w.forward = [KernelWork(g.forwardCost, isMatrix: true)]
        // InnerProductGeometry.backwardCost is both gradients together; each is half its FLOPs.
        if backwardData { w.backwardData = [KernelWork(OpCost(flops: 2 * macs, bytes: f32Bytes(y, wc, x)), isMatrix: true)] }
        if backwardWeights {
            w.backwardWeights = [KernelWork(OpCost(flops: 2 * macs, bytes: f32Bytes(x, y, wc, g.hasBias ? g.outputChannels : 0)),
                                            isMatrix: true)]
            w.optimizer = optimizer.stepType.stepWork(parameterCounts: [wc, g.hasBias ? g.outputChannels : 0])
        }
        return w
    }
}
