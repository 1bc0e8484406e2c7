import UpdraftCore

// Resampling on OpenCL (Kernels/resample.cl): the taps of Ops/Resample.swift go to the device as
// small tables made with their contents (no wait on queued work) and held until the kernel has read
// them (`inFlight`). Forward reads the taps; backward reads, per input row and column, the outputs
// that read it with their weights (the taps transposed on the host), and gathers.
extension OpenCLBackend {
    func resampleForward(_ g: SpatialGeometry, _ x: OpenCLBuffer, _ y: OpenCLBuffer) throws {
        try launchResample("resample_forward", g, x, y, count: g.outputShape.count) { rows, columns, ints, floats in
            for tap in rows + columns {
                ints += [Int32(tap.i0), Int32(tap.i1)]
                floats.append(Float(tap.f))
            }
        }
    }

    func resampleBackward(_ g: SpatialGeometry, _ dy: OpenCLBuffer, _ dx: OpenCLBuffer) throws {
        try launchResample("resample_backward", g, dy, dx, count: g.inputShape.count) { rows, columns, ints, floats in
            let r = Self.readers(of: rows, inSize: g.inHeight), c = Self.readers(of: columns, inSize: g.inWidth)
            ints += r.offsets + c.offsets + r.outputs + c.outputs
            floats += r.weights + c.weights
        }
    }

    /// One work-item per element of `count`; `append` writes each table's ints and floats (from its row
    /// and column taps), which go to the device as buffers held until the kernel finishes.
    private func launchResample(_ name: String, _ g: SpatialGeometry, _ source: OpenCLBuffer, _ destination: OpenCLBuffer,
                                count: Int, append: ([ResampleTap], [ResampleTap], inout [Int32], inout [Float]) -> Void) throws {
        guard count > 0 else { return }
        let table = try g.resampleTable()
        var ints = [Int32](), floats = [Float]()
        for t in 0..<table.count { append(table.rows[t], table.columns[t], &ints, &floats) }
        let k = try opsKernel("resample.cl", name)
        try inFlight.releaseFinished(context: context)
        let intTable = try context.makeIntBuffer(ints)
        let floatTable = try floats.withUnsafeBytes { raw in
            try OpenCLBuffer(context: context, count: floats.count, initial: raw.baseAddress)
        }
        try k.setArguments([.buffer(source), .buffer(destination), .buffer(intTable), .buffer(floatTable),
                            .int(g.inHeight), .int(g.inWidth), .int(g.outHeight), .int(g.outWidth), .int(g.channels),
                            .int(table.count > 1 ? 1 : 0), .int(count)])
        let local = max(1, min(tuning.workGroupSize, k.maxWorkGroupSize))
        let done = try k.launch(global: [count], local: [local], profile: true)
        try inFlight.hold(intTable, until: done, context: context)
        try inFlight.hold(floatTable, until: done, context: context)
    }

    /// The taps of one axis transposed: for each input position, the outputs that read it and with
    /// what weight (`offsets` has inSize + 1 entries; `outputs` and `weights` are padded to 2 per
    /// output, so every table has the same size).
    static func readers(of taps: [ResampleTap], inSize: Int) -> (offsets: [Int32], outputs: [Int32], weights: [Float]) {
        var lists = [[(Int32, Float)]](repeating: [], count: inSize)
        for (o, t) in taps.enumerated() {
            if t.i1 == t.i0 {
                lists[t.i0].append((Int32(o), 1))
            } else {
                lists[t.i0].append((Int32(o), Float(1 - t.f)))
                lists[t.i1].append((Int32(o), Float(t.f)))
            }
        }
        var offsets: [Int32] = [0], outputs: [Int32] = [], weights: [Float] = []
        for list in lists {
            for (o, w) in list { outputs.append(o); weights.append(w) }
            offsets.append(Int32(outputs.count))
        }
        let padded = 2 * taps.count
        outputs += [Int32](repeating: 0, count: padded - outputs.count)
        weights += [Float](repeating: 0, count: padded - weights.count)
        return (offsets, outputs, weights)
    }
}
