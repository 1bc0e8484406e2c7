import UpdraftCore
import UpdraftBackends
import UpdraftModel

/// Convolution: im2col/Winograd/grouped kernels on the CPU, implicit GEMM or CLBlast on OpenCL
/// (`Backend.convolution*`), chosen per shape by the backend from its stored tuning.
enum ConvolutionLayer: LayerKind {
    static let acceptsEpilogue = true

    static func forward(_ c: ForwardCall) throws {
        let p = c.parameters
        try c.backend.convolutionForward(try c.layer.convolutionGeometry(batch: c.batch)!, input: c.inputs[0], weights: p.weights!,
                                         bias: p.bias, output: c.output, residual: c.residual, epilogue: c.epilogue)
    }

    static func backward(_ c: BackwardCall) throws {
        let g = try c.layer.convolutionGeometry(batch: c.batch)!
        try c.weightedBackward(parameters: { dw, db in
            try c.backend.convolutionBackwardWeights(g, input: try c.input(0), outputGradient: c.outputGradient,
                                                     weightGradient: dw, biasGradient: db)
        }, input: { dx in
            try c.backend.convolutionBackwardData(g, outputGradient: c.outputGradient, weights: c.parameters.weights!, inputGradient: dx)
        })
    }

    static func prepare(_ c: PrepareCall) throws -> Int {
        try c.backend.prepareConvolution(try c.layer.convolutionGeometry(batch: c.batch)!, passes: c.passes, epilogue: c.epilogue,
                                         outputChannels: c.outputChannels, residual: c.residual)
    }

    static func computesEachImageAlone(_ op: LayerOp) -> Bool { true }

    static func work(_ layer: GraphLayer, batch: Int, optimizer: OptimizerKind,
                     backwardData: Bool, backwardWeights: Bool) throws -> LayerWork {
        var w = LayerWork()
        guard let g = try layer.convolutionGeometry(batch: batch) else { return w }
        w.forward = [KernelWork(g.forwardCost, isMatrix: true)]
        if backwardData { w.backwardData = [KernelWork(g.backwardDataCost, isMatrix: true)] }
        if backwardWeights {
            w.backwardWeights = [KernelWork(g.backwardWeightsCost, isMatrix: true)]
            w.optimizer = optimizer.stepType.stepWork(parameterCounts: [g.weightShape.count, g.hasBias ? g.outChannels : 0])
        }
        return w
    }

    static func engine(_ layer: GraphLayer, batch: Int, backward: Bool, inputGradient: Bool, on backend: Backend) -> String {
        guard let g = try? layer.convolutionGeometry(batch: batch) else { return "none" }
        switch backend.innermost {
        case let cpu as CPUBackend: return cpu.convolutionEngine(g, backward: backward, inputGradient: inputGradient)
        case let ocl as OpenCLBackend: return ocl.convolutionEngine(g, backward: backward, inputGradient: inputGradient)
        default: return "reference"
        }
    }

    /// Dense convolutions on OpenCL read and write halves (`-D X_HALF/Y_HALF`), slices of a concat included.
    static func forwardHalfStored(_ c: ForwardCall, storage: HalfStorage, slice: TrainingGraph.ConcatSlice?) throws -> Bool {
        guard c.inputs.count == 1 else { return false }
        let g = try c.layer.convolutionGeometry(batch: c.batch)!
        let p = c.parameters
        return try c.backend.convolutionForward(g, input: c.inputs[0], weights: p.weights!, bias: p.bias, output: c.output,
                                                channelOffset: slice?.offset ?? 0, outputChannels: slice?.channels ?? g.outChannels,
                                                epilogue: c.epilogue, storage: storage)
    }

    static func hasHalfKernel(_ layer: GraphLayer, runsInsideAnother: Bool) -> Bool {
        let g = try? layer.convolutionGeometry(batch: 1)
        return g.map { $0.groups == 1 || $0.inChannels / $0.groups * $0.kernelH * $0.kernelW > OpenCLBackend.groupedDirectMaxDepth } ?? false
    }
}
