import UpdraftBackends

/// Activation and gradient memory for one batch size. Buffers come from a pool keyed by (backend,
/// element count) and go back to it as soon as nothing later needs them, so the frozen prefix reuses
/// a few buffers instead of holding every activation, and steady-state steps allocate nothing.
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
    /// How many entries of `values` and `gradients` hold each buffer.
    private var holders: [ObjectIdentifier: Int] = [:]
    /// Blobs whose value is stored as IEEE halves (the frozen prefix's fp16 option; two per float).
    private(set) var halfValues: Set<String> = []
    /// Small fixed buffers: labels, loss, correct count, targets.
    var scratch: [String: DeviceBuffer] = [:]

    private struct PoolKey: Hashable { var backend: ObjectIdentifier; var count: Int }

    package init(batch: Int) { self.batch = batch }

    package func acquire(_ count: Int, on backend: Backend) throws -> DeviceBuffer {
        let key = PoolKey(backend: ObjectIdentifier(backend), count: count)
        // Popped in place: copying the free list out first would copy it whole on every call.
        if let b = pool[key]?.popLast() { return b }
        return try backend.makeBuffer(count: count)
    }

    package func release(_ buffer: DeviceBuffer, from backend: Backend) {
        pool[PoolKey(backend: ObjectIdentifier(backend), count: buffer.count), default: []].append(buffer)
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
    }
}
