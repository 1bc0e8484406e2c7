import UpdraftCore
import UpdraftBackends
import UpdraftModel

/// The broadcasting layers (two inputs with numpy broadcasting), frozen constants and reductions.
enum BroadcastLayer: LayerKind {
    static func kernelFamilies(_ op: LayerOp) -> [KernelFamily] { if case .broadcast = op { return [.broadcast] } else { return [] } }

    static func forward(_ c: ForwardCall) throws {
        switch c.layer.op {
        case .broadcast:
            try c.backend.broadcastBinary(try c.layer.broadcastGeometry(batch: c.batch)!, c.inputs[0], c.inputs[1], output: c.output)
        case .constant:
            // The constant, once per example.
            guard let w = c.parameters.weights, let count = c.layer.weights?.count else {
                throw UpdraftError(.invalidModel, "constant layer '\(c.layer.name)' has no data on its device")
            }
            try c.backend.copyRows(w, rows: [Int](repeating: 0, count: c.batch), to: c.output, rows: Array(0..<c.batch),
                                   rowLength: count)
        case .reduce:
            try c.backend.reduce(try c.layer.reductionGeometry(batch: c.batch)!, input: c.inputs[0], output: c.output)
        default:
            break
        }
    }

    static func backward(_ c: BackwardCall) throws {
        let backend = c.backend, ws = c.ws
        switch c.layer.op {
        case .broadcast:
            guard c.wantsInput.contains(true) else { return }
            let g = try c.layer.broadcastGeometry(batch: c.batch)!
            let a = try c.value(ofInput: 0), b = try c.value(ofInput: 1)
            let y = try c.outputValue()
            let da = c.wantsInput[0] ? try ws.acquire(g.aCount, on: backend) : nil
            let db = c.wantsInput[1] ? try ws.acquire(g.bCount, on: backend) : nil
            var scratch: [DeviceBuffer] = []
            defer { for s in scratch { ws.release(s, from: backend) } }
            try backend.broadcastBinaryBackward(g, a: a, b: b, output: y, outputGradient: c.outputGradient, aGradient: da, bGradient: db,
                                                makeScratch: { count in
                let s = try ws.acquire(count, on: backend)
                scratch.append(s)
                return s
            })
            if let da { try c.addInputGradient(0, da) }
            if let db { try c.addInputGradient(1, db) }
        case .reduce:
            guard c.wantsInput.first == true else { return }
            let g = try c.layer.reductionGeometry(batch: c.batch)!
            let dx = try ws.acquire(g.inputCount, on: backend)
            try backend.reduceBackward(g, input: try c.value(ofInput: 0), outputGradient: c.outputGradient, inputGradient: dx)
            try c.addInputGradient(0, dx)
        default:
            break  // a constant has no input to pass a gradient to
        }
    }

    static func work(_ layer: GraphLayer, batch: Int, optimizer: OptimizerKind,
                     backwardData: Bool, backwardWeights: Bool) throws -> LayerWork {
        var w = LayerWork()
        if let g = try layer.broadcastGeometry(batch: batch) {
            w.forward = [KernelWork(g.cost)]
            // per operand: a product with the other operand (multiply, divide) and a reduction
            let pass = KernelWork(OpCost(flops: Double(g.outputCount), bytes: f32Bytes(g.outputCount, g.outputCount)))
            if backwardData { w.backwardData = [pass, pass, pass, pass] }
        } else if let g = try layer.reductionGeometry(batch: batch) {
            w.forward = [KernelWork(g.cost)]
            if backwardData { w.backwardData = [KernelWork(OpCost(flops: Double(g.inputCount), bytes: f32Bytes(g.outputCount, g.inputCount)))] }
        } else {
            let count = layer.outputShape.withBatch(batch).count
            w.forward = [KernelWork(OpCost(flops: 0, bytes: f32Bytes(count, count)))]
        }
        return w
    }
}
