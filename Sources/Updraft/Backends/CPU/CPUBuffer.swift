import Foundation

/// Host memory owned by `CPUBackend`: `count` float32 values at a 64-byte aligned address (one cache
/// line, and a whole AVX-512 vector), zeroed on creation and freed in `deinit`. The backend reads and
/// writes it through `pointer`; everyone else goes through `Backend.upload` / `download`.
public final class CPUBuffer: DeviceBuffer {
    /// Number of float32 values, fixed at creation (0 or more).
    public let count: Int
    /// The first element. Valid for `count` elements while the buffer lives (one element for an empty buffer).
    let pointer: UnsafeMutablePointer<Float>

    /// A zeroed buffer of `count` (at least 0) values.
    init(count: Int) {
        self.count = count
        let raw = UnsafeMutableRawPointer.allocate(byteCount: max(1, count) * MemoryLayout<Float>.stride,
                                                   alignment: CPUBuffer.alignment)
        pointer = raw.initializeMemory(as: Float.self, repeating: 0, count: max(1, count))
    }

    deinit { pointer.deallocate() }

    static let alignment = 64
}

/// Scratch memory reused across calls (im2col / col2im columns, per-thread partial results): it grows
/// to the largest request seen and is only freed with its owner, so steady-state training allocates nothing.
final class CPUWorkspace {
    private(set) var capacity = 0
    private var storage: UnsafeMutablePointer<Float>?

    /// At least `count` floats, contents undefined. Valid until the next call to `floats` or deinit.
    func floats(_ count: Int) -> UnsafeMutablePointer<Float> {
        if let storage, capacity >= count { return storage }
        storage?.deallocate()
        let n = max(1, count)
        let raw = UnsafeMutableRawPointer.allocate(byteCount: n * MemoryLayout<Float>.stride, alignment: CPUBuffer.alignment)
        let p = raw.bindMemory(to: Float.self, capacity: n)
        storage = p
        capacity = n
        return p
    }

    deinit { storage?.deallocate() }
}
