/// Forward and backward of the broadcasting layers, constants and reductions.
extension Executor {
    func broadcastForward(_ layer: GraphLayer, inputs x: [DeviceBuffer], output y: DeviceBuffer, batch: Int,
                          backend: Backend) throws {
        switch layer.op {
        case .broadcast:
            try backend.broadcastBinary(try layer.broadcastGeometry(batch: batch)!, x[0], x[1], output: y)
        case .constant:
            // The constant, once per example.
            guard let w = params(layer).weights, let count = layer.weights?.count else {
                throw UpdraftError(.invalidModel, "constant layer '\(layer.name)' has no data on its device")
            }
            try backend.copyRows(w, rows: [Int](repeating: 0, count: batch), to: y, rows: Array(0..<batch), rowLength: count)
        case .reduce:
            try backend.reduce(try layer.reductionGeometry(batch: batch)!, input: x[0], output: y)
        default:
            break
        }
    }

    func broadcastBackward(_ layer: GraphLayer, wantsInput: [Bool], outputGradient dy: DeviceBuffer, ws: Workspace,
                           backend: Backend) throws {
        let n = ws.batch
        switch layer.op {
        case .broadcast:
            guard wantsInput.contains(true) else { return }
            let g = try layer.broadcastGeometry(batch: n)!
            let a = try value(layer.inputs[0], on: backend, ws: ws), b = try value(layer.inputs[1], on: backend, ws: ws)
            let y = try value(layer.output, on: backend, ws: ws)
            let da = wantsInput[0] ? try ws.acquire(g.aCount, on: backend) : nil
            let db = wantsInput[1] ? try ws.acquire(g.bCount, on: backend) : nil
            var scratch: [DeviceBuffer] = []
            defer { for s in scratch { ws.release(s, from: backend) } }
            try backend.broadcastBinaryBackward(g, a: a, b: b, output: y, outputGradient: dy, aGradient: da, bGradient: db,
                                                makeScratch: { count in
                let s = try ws.acquire(count, on: backend)
                scratch.append(s)
                return s
            })
            if let da { try ws.addGradient(layer.inputs[0], da, on: backend) }
            if let db { try ws.addGradient(layer.inputs[1], db, on: backend) }
        case .reduce:
            guard wantsInput.first == true else { return }
            let g = try layer.reductionGeometry(batch: n)!
            let dx = try ws.acquire(g.inputCount, on: backend)
            try backend.reduceBackward(g, input: try value(layer.inputs[0], on: backend, ws: ws), outputGradient: dy, inputGradient: dx)
            try ws.addGradient(layer.inputs[0], dx, on: backend)
        default:
            break  // a constant has no input to pass a gradient to
        }
    }
}

extension CostModel {
    static func broadcastWork(for layer: GraphLayer, batch: Int, backwardData: Bool) throws -> LayerWork {
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
