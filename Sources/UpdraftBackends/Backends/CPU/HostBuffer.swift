import UpdraftCore

/// A buffer in host memory: the storage of the Double reference backend. (The fast CPU backend
/// keeps its own aligned `CPUBuffer`s; a buffer goes only to the backend that made it.)
public final class HostBuffer: DeviceBuffer {
    /// The float32 elements, read and written directly by the CPU backends.
    public var values: [Float]
    /// Number of float32 values: `values.count`.
    public var count: Int { values.count }

    /// A zero-filled buffer of `count` values (a negative count gives an empty buffer).
    public init(count: Int) { values = [Float](repeating: 0, count: max(0, count)) }
    /// A buffer holding `values` (copied on write, as any array).
    public init(_ values: [Float]) { self.values = values }
}

extension HostBuffer {
    /// `buffer` as a host buffer, or an error naming the op, the argument and the buffer's real type.
    static func cast(_ buffer: DeviceBuffer, backend: String, _ what: String) throws -> HostBuffer {
        guard let host = buffer as? HostBuffer else {
            throw UpdraftError(.invalidArgument,
                "\(backend): \(what) is a \(type(of: buffer)), not a host buffer",
                hint: "create buffers with the backend that runs the op (backend.makeBuffer)")
        }
        return host
    }
}
