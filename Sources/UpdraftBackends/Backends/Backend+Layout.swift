// Layout ops for backends without their own kernel (wrappers, test doubles): the permuted copy
// through the host, computed by the Double reference. CPUBackend, ReferenceBackend and
// OpenCLBackend implement `transpose` themselves.
import UpdraftCore

public extension Backend {
    func transpose(_ g: TransposeGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        let x = try download(input, offset: 0, count: g.count).map(Double.init)
        try upload(try Reference.transpose(g, input: x).map(Float.init), to: output, offset: 0)
    }
}
