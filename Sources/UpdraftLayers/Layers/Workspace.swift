import UpdraftBackends

/// Activation and gradient memory for one batch size. Buffers come from a pool keyed by (backend,
/// element count) and go back to it as soon as nothing later needs them, so the frozen prefix reuses
/// a few buffers instead of holding every activation, and steady-state steps allocate nothing.
/// A large request with no buffer of its size free takes the smallest larger free CPU buffer (up to
/// `sharedRatio` times its size) as a view of its first values, so the first step also reuses the
/// memory of blobs it is done with instead of faulting in fresh pages: SqueezeNet's peak host memory
/// 814 -> 560 MiB, the first epoch's page faults 257K -> 192K (MobileNetV2: 1.3 GiB -> 898 MiB).
///
/// A buffer may be the value (or gradient) of several blobs at once: layout ops that only re-label
/// a shape (reshape, flatten, squeeze, ...) alias their input. `holders` counts the blobs holding each
/// buffer; it goes back to the pool when the last one lets go.
package final class Workspace {
    package let batch: Int
    /// Forward values by blob name, with the backend that holds them.
    private(set) var values: [String: (buffer: DeviceBuffer, backend: Backend)] = [:]
    /// Gradients by blob name (on the tail backend).
    private(set) var gradients: [String: DeviceBuffer] = [:]
    private var pool: [PoolKey: [DeviceBuffer]] = [:]
    /// Views handed out over a larger pooled CPU buffer (`acquire`), by view: the buffer under it,
    /// which goes back to the pool when the view is released.
    private var viewBases: [ObjectIdentifier: DeviceBuffer] = [:]
    /// How many entries of `values` and `gradients` hold each buffer.
    private var holders: [ObjectIdentifier: Int] = [:]
    /// Blobs whose value is stored as IEEE halves (the frozen prefix's fp16 option; two per float).
    private(set) var halfValues: Set<String> = []
    /// Small fixed buffers: labels, loss, correct count, targets.
    var scratch: [String: DeviceBuffer] = [:]
    /// Buffers the workspace holds but does not own (views of another workspace's blobs, for a chunk
    /// of its images: `PrefixChunking`): never pooled, only let go.
    private var borrowed: Set<ObjectIdentifier> = []
    /// Where a blob's value is to be written instead of into a pooled buffer (`acquireOutput`), by blob.
    private var destinations: [String: DeviceBuffer] = [:]

    private struct PoolKey: Hashable { var backend: ObjectIdentifier; var count: Int }

    package init(batch: Int) { self.batch = batch }

    package func acquire(_ count: Int, on backend: Backend) throws -> DeviceBuffer {
        let key = PoolKey(backend: ObjectIdentifier(backend), count: count)
        // Popped in place: copying the free list out first would copy it whole on every call.
        if let b = pool[key]?.popLast() { return b }
        if count >= Self.sharedFrom, let base = takeLarger(than: count, on: key.backend) {
            let view = base.view(count: count)
            viewBases[ObjectIdentifier(view)] = base
            return view
        }
        return try backend.makeBuffer(count: count)
    }

    /// The buffer to write `blob`'s value of `count` values into: the destination set for it
    /// (`setDestination`) when its size matches, else a pooled one (`acquire`).
    package func acquireOutput(_ blob: String, count: Int, on backend: Backend) throws -> DeviceBuffer {
        if let d = destinations[blob], d.count == count {
            destinations[blob] = nil
            borrowed.insert(ObjectIdentifier(d))
            return d
        }
        return try acquire(count, on: backend)
    }

    /// Makes `buffer` (memory the workspace does not own) the place `blob`'s value is written.
    package func setDestination(_ blob: String, _ buffer: DeviceBuffer) { destinations[blob] = buffer }

    /// Makes `buffer`, memory the workspace does not own, the value of `blob`.
    package func setBorrowedValue(_ blob: String, _ buffer: DeviceBuffer, on backend: Backend) {
        borrowed.insert(ObjectIdentifier(buffer))
        setValue(blob, buffer, on: backend)
    }

    package func release(_ buffer: DeviceBuffer, from backend: Backend) {
        if borrowed.remove(ObjectIdentifier(buffer)) != nil { return }
        // A view gives its memory back as the pooled buffer it was cut from.
        let returned = viewBases.removeValue(forKey: ObjectIdentifier(buffer)) ?? buffer
        pool[PoolKey(backend: ObjectIdentifier(backend), count: returned.count), default: []].append(returned)
    }

    /// Requests of at least this many floats (4 MiB, where host buffers start being mapped on their
    /// own) may take a larger pooled CPU buffer instead of new memory.
    package static let sharedFrom = 1 << 20
    /// How many times larger than the request a pooled buffer taken that way may be (2, 8, 32 and
    /// unbounded measured 237K, 192K, 192K and 192K page faults on SqueezeNet's 3-epoch run; 8 keeps a
    /// small blob from holding a much larger buffer that a later large blob then has to allocate anew).
    package static let sharedRatio = 8

    /// The smallest pooled CPU buffer on `backend` larger than `count` and at most `sharedRatio`
    /// times it, taken out of the pool.
    private func takeLarger(than count: Int, on backend: ObjectIdentifier) -> CPUBuffer? {
        var best: PoolKey?
        for (key, free) in pool where key.backend == backend && key.count > count && key.count <= count * Self.sharedRatio
            && free.last is CPUBuffer && key.count < best?.count ?? .max {
            best = key
        }
        guard let best else { return nil }
        return pool[best]?.popLast() as? CPUBuffer
    }

    /// A scratch buffer that stays for the workspace's life (labels, loss, …).
    package func scratch(_ name: String, count: Int, on backend: Backend) throws -> DeviceBuffer {
        if let b = scratch[name], b.count == count { return b }
        let b = try backend.makeBuffer(count: count)
        scratch[name] = b
        return b
    }

    private func hold(_ buffer: DeviceBuffer) { holders[ObjectIdentifier(buffer), default: 0] += 1 }

    /// One holder lets go of `buffer`; the last one returns it to the pool.
    private func letGo(_ buffer: DeviceBuffer, from backend: Backend) {
        let id = ObjectIdentifier(buffer)
        let n = (holders[id] ?? 1) - 1
        if n > 0 { holders[id] = n; return }
        holders[id] = nil
        release(buffer, from: backend)
    }

    /// Whether a blob's value or gradient holds `buffer`.
    func isHeld(_ buffer: DeviceBuffer) -> Bool { holders[ObjectIdentifier(buffer)] != nil }

    /// Makes `buffer` the value of `blob`. A buffer that is already another blob's value becomes an
    /// alias: both blobs hold it.
    /// `half`: the buffer holds the blob's values as IEEE halves.
    package func setValue(_ blob: String, _ buffer: DeviceBuffer, on backend: Backend, half: Bool = false) {
        hold(buffer)
        if let old = values[blob] { letGo(old.buffer, from: old.backend) }
        values[blob] = (buffer, backend)
        if half { halfValues.insert(blob) } else { halfValues.remove(blob) }
    }

    package func value(_ blob: String) -> (buffer: DeviceBuffer, backend: Backend)? { values[blob] }

    /// Whether `blob`'s value is stored as halves.
    package func isHalf(_ blob: String) -> Bool { halfValues.contains(blob) }

    /// Removes `blob`'s value and hands it to the caller (who releases it when done). A buffer that
    /// other blobs still hold (an alias) stays theirs: the caller gets a copy.
    package func takeValue(_ blob: String) throws -> (buffer: DeviceBuffer, backend: Backend)? {
        guard let v = values.removeValue(forKey: blob) else { return nil }
        halfValues.remove(blob)
        let id = ObjectIdentifier(v.buffer)
        if let n = holders[id], n > 1 {
            holders[id] = n - 1
            let copy = try acquire(v.buffer.count, on: v.backend)
            try v.backend.copy(v.buffer, to: copy)
            return (copy, v.backend)
        }
        holders[id] = nil
        return v
    }

    package func dropValue(_ blob: String) {
        if let old = values.removeValue(forKey: blob) { letGo(old.buffer, from: old.backend) }
        halfValues.remove(blob)
    }

    package func gradient(_ blob: String) -> DeviceBuffer? { gradients[blob] }

    /// Adds `buffer` to the gradient of `blob`. A fresh buffer is owned by the workspace from now on;
    /// another blob's gradient buffer (a layout op's backward) becomes an alias when `blob` has no
    /// gradient yet, and is only read when it has.
    package func addGradient(_ blob: String, _ buffer: DeviceBuffer, on backend: Backend) throws {
        if let existing = gradients[blob] {
            try backend.accumulate(buffer, into: existing)
            if !isHeld(buffer) { release(buffer, from: backend) }
        } else {
            gradients[blob] = buffer
            hold(buffer)
        }
    }

    /// Returns every gradient buffer to the pool (after a step).
    package func clearGradients(on backend: Backend) {
        for (_, b) in gradients { letGo(b, from: backend) }
        gradients.removeAll()
    }

    /// Returns every forward value to the pool.
    package func clearValues() {
        for (_, v) in values { letGo(v.buffer, from: v.backend) }
        values.removeAll()
        halfValues.removeAll()
        destinations.removeAll()
    }
}
