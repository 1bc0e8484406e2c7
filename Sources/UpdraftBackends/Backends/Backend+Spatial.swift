import UpdraftCore

/// The spatial ops through the host: the buffers are read back, the Double reference runs, and the
/// result (rounded to float32) is written. The reference backend and test doubles use these; the CPU
/// and OpenCL backends have their own loops and kernels.
public extension Backend {
    func hostSpatialForward(_ g: SpatialGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        let x = try download(input, offset: 0, count: g.inputShape.count)
        try checkRange(offset: 0, count: g.outputShape.count, in: output, "\(g.op.familyName) output")
        let y = try Reference.spatialForward(g, input: x.map(Double.init))
        try upload(y.map(Float.init), to: output, offset: 0)
    }

    func hostSpatialBackward(_ g: SpatialGeometry, input: DeviceBuffer, output: DeviceBuffer, outputGradient: DeviceBuffer,
                         inputGradient: DeviceBuffer) throws {
        let x = try download(input, offset: 0, count: g.inputShape.count)
        let y = try download(output, offset: 0, count: g.outputShape.count)
        let dy = try download(outputGradient, offset: 0, count: g.outputShape.count)
        try checkRange(offset: 0, count: g.inputShape.count, in: inputGradient, "\(g.op.familyName) input gradient")
        let dx = try Reference.spatialBackward(g, input: x.map(Double.init), output: y.map(Double.init),
                                               outputGradient: dy.map(Double.init))
        try upload(dx.map(Float.init), to: inputGradient, offset: 0)
    }
}
