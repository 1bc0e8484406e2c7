import Foundation
import UpdraftCore

// Ranged upload/download (straight reads and writes at an offset) and row gathers/scatters
// (Kernels/concat.cl `copy_rows`, one launch per call), checked with `Backend.checkRange` /
// `checkRows` first.
extension OpenCLBackend {
    /// A blocking write at `offset`, checked with `checkRange` (waits for queued work first).
    public func upload(_ values: [Float], to buffer: DeviceBuffer, offset: Int) throws {
        let b = try cl(buffer)
        try checkRange(offset: offset, count: values.count, in: b, "upload destination")
        try context.write(values, to: b, offset: offset)
    }

    /// A blocking read of `offset ..< offset + count`, checked with `checkRange`.
    public func download(_ buffer: DeviceBuffer, offset: Int, count: Int) throws -> [Float] {
        let b = try cl(buffer)
        try checkRange(offset: offset, count: count, in: b, "download source")
        return try context.read(b, count: count, offset: offset)
    }

    /// One `copy_rows` launch (`copy_rows4` when rows are whole float4s) over (row piece, pair). The
    /// (source, destination) row pairs go to the device in a small int buffer filled when it is made,
    /// so the call never waits for queued work; the buffer is held (`inFlight`) until the kernel has
    /// finished reading it.
    public func copyRows(_ source: DeviceBuffer, rows sourceRows: [Int], to destination: DeviceBuffer,
                         rows destinationRows: [Int], rowLength: Int) throws {
        let s = try cl(source), d = try cl(destination)
        try checkRows(s, rows: sourceRows, d, rows: destinationRows, rowLength: rowLength)
        guard rowLength > 0, !sourceRows.isEmpty else { return }
        let pairs = try rowPairs(sourceRows, destinationRows, rowLength: rowLength)
        let vectorised = rowLength % 4 == 0
        let columns = vectorised ? rowLength / 4 : rowLength
        let k = try opsKernel("concat.cl", vectorised ? "copy_rows4" : "copy_rows")
        try launchRowCopy(k, s, d, pairs: pairs, columns: columns)
    }

    /// `copy_rows_to_half` / `copy_rows_from_half` (Kernels/half.cl), launched like `copyRows`.
    public func copyRows(_ source: DeviceBuffer, rows sourceRows: [Int], to destination: DeviceBuffer,
                         rows destinationRows: [Int], rowLength: Int, toHalf: Bool) throws {
        let s = try cl(source), d = try cl(destination)
        try checkRows(s, rows: sourceRows, d, rows: destinationRows, rowLength: rowLength, halfSide: toHalf ? 0 : 1)
        guard rowLength > 0, !sourceRows.isEmpty else { return }
        let pairs = try rowPairs(sourceRows, destinationRows, rowLength: rowLength)
        let k = try opsKernel("half.cl", toHalf ? "copy_rows_to_half" : "copy_rows_from_half")
        try launchRowCopy(k, s, d, pairs: pairs, columns: rowLength)
    }

    /// Launches a row-copy kernel (arguments: source, destination, the row pairs, columns, rows) over
    /// (column, pair), the pairs in an int buffer held (`inFlight`) until the kernel has read them.
    private func launchRowCopy(_ k: OpenCLKernel, _ s: OpenCLBuffer, _ d: OpenCLBuffer, pairs: [Int32], columns: Int) throws {
        let rows = pairs.count / 2
        try inFlight.releaseFinished(context: context)
        let indices = try context.makeIntBuffer(pairs)
        try k.setArguments([.buffer(s), .buffer(d), .buffer(indices), .int(columns), .int(rows)])
        let local = rowsWorkGroup(columns: columns, rows: rows, kernel: k)
        let done = try k.launch(global: [columns, rows], local: local, profile: true)
        try inFlight.hold(indices, until: done, context: context)
        if let done {
            // Seen by `recordLaunches` (updraft-bench kernels times the cache's gather by it).
            gemmWorkspace.records?.append(OpenCLLaunchRecord(kernel: k.name, defines: [:], global: [columns, rows],
                                                             local: local, event: done))
        }
    }

    /// The pairs as the kernel reads them, (source row, destination row) interleaved, or an error when
    /// a row or the length does not fit the kernel's 32-bit ints.
    private func rowPairs(_ sourceRows: [Int], _ destinationRows: [Int], rowLength: Int) throws -> [Int32] {
        var pairs = [Int32]()
        pairs.reserveCapacity(2 * sourceRows.count)
        for (from, to) in zip(sourceRows, destinationRows) {
            guard let from32 = Int32(exactly: from), let to32 = Int32(exactly: to) else { break }
            pairs.append(from32)
            pairs.append(to32)
        }
        guard pairs.count == 2 * sourceRows.count, Int32(exactly: rowLength) != nil else {
            throw UpdraftError(.unsupported, "\(name): copyRows rows and row length (\(rowLength)) must fit a 32-bit int",
                               hint: "split the buffer into smaller ones, or use longer rows")
        }
        return pairs
    }

    /// A 2-D work-group of at most the tuned size: the whole (power-of-two rounded) row when rows are
    /// short, so that rows of 1 or 3 floats do not leave most of each group idle, the rest over pairs.
    private func rowsWorkGroup(columns: Int, rows: Int, kernel k: OpenCLKernel) -> [Int] {
        let size = max(1, min(tuning.workGroupSize, k.maxWorkGroupSize))
        var across = 1
        while across < columns, across * 2 <= size { across *= 2 }
        if columns >= size { across = size }
        let down = max(1, min(size / across, rows, device.maxWorkItemSizes.dropFirst().first ?? 1))
        return [across, down]
    }
}

/// Buffers that queued kernels still read, each held until its kernel's event says it finished.
/// (OpenCL itself defers freeing a released buffer until the queued commands that use it are done;
/// holding it here makes that not depend on the driver, at no cost.) Safe to use from several threads.
final class OpenCLInFlightBuffers {
    private var held: [(buffer: OpenCLBuffer, done: OpenCLEvent)] = []
    private let lock = NSLock()
    /// Beyond this many held buffers the oldest is waited for: a caller that queues gathers and never
    /// synchronizes does not grow the list without bound.
    static let limit = 64

    var count: Int { lock.withLock { held.count } }

    /// Keeps `buffer` until `done` completes; without an event, waits for the queue here instead.
    func hold(_ buffer: OpenCLBuffer, until done: OpenCLEvent?, context: OpenCLContext) throws {
        guard let done else { return try context.finish() }
        lock.withLock { held.append((buffer, done)) }
    }

    /// Drops the buffers whose kernels have finished; when more than `limit` are still queued, waits
    /// for the oldest ones.
    func releaseFinished(context: OpenCLContext) throws {
        let oldest: OpenCLEvent? = lock.withLock {
            held.removeAll { $0.done.isComplete }
            return held.count >= Self.limit ? held[held.count - Self.limit].done : nil
        }
        guard let oldest else { return }
        try context.flush()
        try oldest.wait()
        lock.withLock { held.removeAll { $0.done.isComplete } }
    }
}
