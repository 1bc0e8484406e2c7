import UpdraftCore
import UpdraftBackends
import UpdraftModel

/// Max or average pooling, windowed or global (`Backend.pooling*`).
enum PoolingLayer: LayerKind {
    static func computesEachImageAlone(_ op: LayerOp) -> Bool { true }

    static func forward(_ c: ForwardCall) throws {
        try c.backend.poolingForward(try c.layer.poolingGeometry(batch: c.batch)!, input: c.inputs[0], output: c.output)
    }

    static func backward(_ c: BackwardCall) throws {
        guard let y = c.output else { return }
        try c.inputGradient { dx in
            try c.backend.poolingBackward(try c.layer.poolingGeometry(batch: c.batch)!, input: try c.input(0), output: y,
                                          outputGradient: c.outputGradient, inputGradient: dx)
        }
    }

    static func prepare(_ c: PrepareCall) throws -> Int {
        try c.backend.preparePooling(try c.layer.poolingGeometry(batch: c.batch)!, backward: c.passes.contains(.backwardData))
    }

    /// On the CPU: oneDNN where the tuning chose it, else Updraft's loops.
    static func engine(_ layer: GraphLayer, batch: Int, backward: Bool, inputGradient: Bool, on backend: Backend) -> String {
        guard let cpu = backend.innermost as? CPUBackend, let g = try? layer.poolingGeometry(batch: batch) else { return backend.ownEngine }
        return cpu.opEngineName(.pooling(g), backward: backward, inputGradient: inputGradient)
    }

    static func work(_ layer: GraphLayer, batch: Int, optimizer: OptimizerKind,
                     backwardData: Bool, backwardWeights: Bool) throws -> LayerWork {
        guard let g = try layer.poolingGeometry(batch: batch) else { return LayerWork() }
        return .passes(forward: g.forwardCost, backward: g.backwardCost, backwardData: backwardData)
    }

    /// Windowed pooling on OpenCL reads and writes halves; a global pool runs in fp32 between conversions.
    static func forwardHalfStored(_ c: ForwardCall, storage: HalfStorage, slice: TrainingGraph.ConcatSlice?) throws -> Bool {
        guard c.inputs.count == 1 else { return false }
        return try c.backend.poolingForward(try c.layer.poolingGeometry(batch: c.batch)!, input: c.inputs[0], output: c.output,
                                            storage: storage)
    }

    static func hasHalfKernel(_ layer: GraphLayer, runsInsideAnother: Bool) -> Bool {
        let g = try? layer.poolingGeometry(batch: 1)
        return g.map { !($0.outHeight == 1 && $0.outWidth == 1 && $0.kernelH >= $0.inHeight && $0.kernelW >= $0.inWidth) } ?? false
    }
}
