import Foundation

/// Host memory owned by `CPUBackend`: `count` float32 values at a 64-byte aligned address (one cache
/// line, and a whole AVX-512 vector), zeroed on creation and freed in `deinit` (a view, `view(offset:count:)`,
/// may start anywhere in its base). The backend reads and writes it through `pointer`; everyone else
/// goes through `Backend.upload` / `download`.
public final class CPUBuffer: DeviceBuffer {
    /// Number of float32 values, fixed at creation (0 or more).
    public let count: Int
    /// The first element. Valid for `count` elements while the buffer lives (one element for an empty buffer).
    let pointer: UnsafeMutablePointer<Float>
    private let memory: HostAllocation

    /// A zeroed buffer of `count` (at least 0) values.
    init(count: Int) {
        self.count = count
        memory = HostAllocation(bytes: max(1, count) * MemoryLayout<Float>.stride, zeroed: true)
        pointer = memory.base.bindMemory(to: Float.self, capacity: max(1, count))
    }

    /// The first `count` values of `base`'s memory under a buffer of their own (contents as `base`
    /// left them, not zeroed). The view keeps the memory alive; `base` must not be used while the
    /// view is (the workspace hands a pooled buffer out this way for a smaller blob).
    private init(viewing base: CPUBuffer, offset: Int = 0, count: Int) {
        self.count = count
        memory = base.memory
        pointer = base.pointer + offset
    }

    /// A view of this buffer's first `count` values (at most `self.count`): see `init(viewing:count:)`.
    package func view(count: Int) -> CPUBuffer {
        precondition(count >= 0 && count <= self.count, "a view of \(count) values over a buffer of \(self.count)")
        return CPUBuffer(viewing: self, count: count)
    }

    /// A view of values `offset ..< offset + count` of this buffer, which the view's writes change (the
    /// executor runs a chunk of a batch's images on views of the batch's blobs: `PrefixChunking`).
    /// Not 64-byte aligned in general; the CPU paths load and store at any alignment.
    package func view(offset: Int, count: Int) -> CPUBuffer {
        precondition(offset >= 0 && count >= 0 && offset <= self.count - count,
                     "a view of \(count) values at \(offset) over a buffer of \(self.count)")
        return CPUBuffer(viewing: self, offset: offset, count: count)
    }

    static let alignment = 64
}

/// One host allocation. Large ones (activations, im2col columns, feature-cache arenas: tens to
/// hundreds of MiB) are mapped on their own: the kernel hands out zeroed pages as they are first
/// touched, so a zeroed buffer needs no memset pass of its own, and freeing one returns its memory at
/// once instead of leaving it to the allocator. Measured on a first training epoch from files on the
/// CPU (`updraft-bench epochs --data`, 600 JPEGs, feature cache on): 4.75 s against 5.03 s with the
/// allocator and memset. Huge-page advice (`MADV_HUGEPAGE`) was tried and dropped: it cut the page
/// faults 5x but made the kernel's compaction and zeroing cost more than it saved (5.7 s).
/// Small allocations use the allocator.
final class HostAllocation {
    let base: UnsafeMutableRawPointer
    private let mappedLength: Int?

    /// Allocations from this size up are mapped.
    static let mappedFrom = 4 << 20

    /// At least `bytes` bytes, 64-byte aligned; zero-filled when `zeroed` (mapped memory always is).
    init(bytes: Int, zeroed: Bool) {
        if bytes >= Self.mappedFrom,
           let raw = mmap(nil, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), raw != MAP_FAILED {
            base = raw  // page aligned
            mappedLength = bytes
            return
        }
        base = UnsafeMutableRawPointer.allocate(byteCount: max(1, bytes), alignment: CPUBuffer.alignment)
        if zeroed { base.initializeMemory(as: UInt8.self, repeating: 0, count: max(1, bytes)) }
        mappedLength = nil
    }

    deinit {
        if let mappedLength { munmap(base, mappedLength) } else { base.deallocate() }
    }
}

/// Scratch memory reused across calls (im2col / col2im columns, per-thread partial results): it grows
/// to the largest request seen and is only freed with its owner, so steady-state training allocates nothing.
final class CPUWorkspace {
    private(set) var capacity = 0
    private var memory: HostAllocation?

    /// At least `count` floats, contents undefined. Valid until the next call to `floats` or deinit.
    func floats(_ count: Int) -> UnsafeMutablePointer<Float> {
        if let memory, capacity >= count { return memory.base.assumingMemoryBound(to: Float.self) }
        let n = max(1, count)
        memory = nil  // the old block goes before the new one is mapped
        let made = HostAllocation(bytes: n * MemoryLayout<Float>.stride, zeroed: false)
        memory = made
        capacity = n
        return made.base.bindMemory(to: Float.self, capacity: n)
    }
}
