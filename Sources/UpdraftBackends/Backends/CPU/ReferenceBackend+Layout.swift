// The reference backend's layout ops: Reference.transpose on Double.
import UpdraftCore

extension ReferenceBackend {
    /// Runs `Reference.transpose` on the input widened to Double, then rounds to float32 (an exact permutation).
    public func transpose(_ g: TransposeGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        let x = try read(input, count: g.count, "transpose input")
        try write(try Reference.transpose(g, input: x), to: output, "transpose output")
    }
}
