/// Activation and gradient memory for one batch size. Buffers come from a pool keyed by (backend,
/// element count) and go back to it as soon as nothing later needs them, so the frozen prefix reuses
/// a few buffers instead of holding every activation, and steady-state steps allocate nothing.
final class Workspace {
    let batch: Int
    /// Forward values by blob name, with the backend that holds them.
    private(set) var values: [String: (buffer: DeviceBuffer, backend: Backend)] = [:]
    /// Gradients by blob name (on the tail backend).
    private(set) var gradients: [String: DeviceBuffer] = [:]
    private var pool: [PoolKey: [DeviceBuffer]] = [:]
    /// Small fixed buffers: labels, loss, correct count, targets.
    var scratch: [String: DeviceBuffer] = [:]

    private struct PoolKey: Hashable { var backend: ObjectIdentifier; var count: Int }

    init(batch: Int) { self.batch = batch }

    func acquire(_ count: Int, on backend: Backend) throws -> DeviceBuffer {
        let key = PoolKey(backend: ObjectIdentifier(backend), count: count)
        // Popped in place: copying the free list out first would copy it whole on every call.
        if let b = pool[key]?.popLast() { return b }
        return try backend.makeBuffer(count: count)
    }

    func release(_ buffer: DeviceBuffer, from backend: Backend) {
        pool[PoolKey(backend: ObjectIdentifier(backend), count: buffer.count), default: []].append(buffer)
    }

    /// A scratch buffer that stays for the workspace's life (labels, loss, …).
    func scratch(_ name: String, count: Int, on backend: Backend) throws -> DeviceBuffer {
        if let b = scratch[name], b.count == count { return b }
        let b = try backend.makeBuffer(count: count)
        scratch[name] = b
        return b
    }

    func setValue(_ blob: String, _ buffer: DeviceBuffer, on backend: Backend) {
        if let old = values[blob], old.buffer !== buffer { release(old.buffer, from: old.backend) }
        values[blob] = (buffer, backend)
    }

    func value(_ blob: String) -> (buffer: DeviceBuffer, backend: Backend)? { values[blob] }

    /// Removes `blob`'s value and hands it to the caller (who releases it when done).
    func takeValue(_ blob: String) -> (buffer: DeviceBuffer, backend: Backend)? { values.removeValue(forKey: blob) }

    func dropValue(_ blob: String) {
        if let old = values.removeValue(forKey: blob) { release(old.buffer, from: old.backend) }
    }

    func gradient(_ blob: String) -> DeviceBuffer? { gradients[blob] }

    /// Adds `buffer` (owned by the workspace from now on) to the gradient of `blob`.
    func addGradient(_ blob: String, _ buffer: DeviceBuffer, on backend: Backend) throws {
        if let existing = gradients[blob] {
            try backend.accumulate(buffer, into: existing)
            release(buffer, from: backend)
        } else {
            gradients[blob] = buffer
        }
    }

    /// Returns every gradient buffer to the pool (after a step).
    func clearGradients(on backend: Backend) {
        for (_, b) in gradients { release(b, from: backend) }
        gradients.removeAll()
    }

    /// Returns every forward value to the pool.
    func clearValues() {
        for (_, v) in values { release(v.buffer, from: v.backend) }
        values.removeAll()
    }
}
