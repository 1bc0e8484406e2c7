// The reference backend's layout ops: Reference.transpose on Double.
extension ReferenceBackend {
    public func transpose(_ g: TransposeGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        let x = try read(input, count: g.count, "transpose input")
        try write(try Reference.transpose(g, input: x), to: output, "transpose output")
    }
}
