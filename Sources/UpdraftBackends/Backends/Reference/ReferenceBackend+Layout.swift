// The reference backend's layout ops: Reference.stridedCopy on Double.
import UpdraftCore

extension ReferenceBackend {
    /// Runs `Reference.stridedCopy` on the buffers widened to Double, then rounds to float32 (an exact copy).
    public func stridedCopy(_ g: StridedCopy, from source: DeviceBuffer, to destination: DeviceBuffer) throws {
        try g.validate("\(name) strided copy")
        let x = try read(source, count: g.sourceExtent, "strided copy source")
        var y = try read(destination, count: g.destinationExtent, "strided copy destination")
        try Reference.stridedCopy(g, source: x, into: &y)
        try write(y, to: destination, "strided copy destination")
    }
}
