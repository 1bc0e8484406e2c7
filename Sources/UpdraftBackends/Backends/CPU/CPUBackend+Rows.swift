// Ranged upload/download and row gathers/scatters (the feature cache's traffic): straight memory
// copies into and out of the CPUBuffer, checked with `Backend.checkRange` / `checkRows` first.
extension CPUBackend {
    /// A straight copy into `offset ..< offset + values.count`, checked with `checkRange`.
    public func upload(_ values: [Float], to buffer: DeviceBuffer, offset: Int) throws {
        let b = try cpuBuffer(buffer, "upload destination")
        try checkRange(offset: offset, count: values.count, in: b, "upload destination")
        values.withUnsafeBufferPointer { src in
            if let base = src.baseAddress, src.count > 0 { (b.pointer + offset).update(from: base, count: src.count) }
        }
    }

    /// A straight copy out of `offset ..< offset + count`, checked with `checkRange`.
    public func download(_ buffer: DeviceBuffer, offset: Int, count: Int) throws -> [Float] {
        let b = try cpuBuffer(buffer, "download source")
        try checkRange(offset: offset, count: count, in: b, "download source")
        return Array(UnsafeBufferPointer(start: b.pointer + offset, count: count))
    }

    /// One memcpy per row (or per piece of a row). The rows are seen as one run of
    /// `rows.count * rowLength` elements that `parallelChunks` splits like `copy`, so a few long rows
    /// and many short ones spread over the threads alike, and small gathers stay on this thread.
    public func copyRows(_ source: DeviceBuffer, rows sourceRows: [Int], to destination: DeviceBuffer,
                         rows destinationRows: [Int], rowLength: Int) throws {
        let s = try cpuBuffer(source, "copyRows source"), d = try cpuBuffer(destination, "copyRows destination")
        try checkRows(s, rows: sourceRows, d, rows: destinationRows, rowLength: rowLength)
        guard rowLength > 0, !sourceRows.isEmpty else { return }
        // No overflow: the destination rows are distinct rows of `d`, so the total is at most d.count.
        let total = sourceRows.count * rowLength
        let sp = s.pointer, dp = d.pointer
        sourceRows.withUnsafeBufferPointer { from in
            destinationRows.withUnsafeBufferPointer { to in
                parallelChunks(total, grain: CPUParallel.copyGrain) { r in
                    var row = r.lowerBound / rowLength, column = r.lowerBound - row * rowLength
                    var position = r.lowerBound
                    while position < r.upperBound {
                        let n = min(rowLength - column, r.upperBound - position)
                        (dp + to[row] * rowLength + column).update(from: sp + from[row] * rowLength + column, count: n)
                        position += n
                        row += 1
                        column = 0
                    }
                }
            }
        }
    }

    /// `convertRows` on the buffers' memory, split over the threads like `copyRows`.
    public func copyRows(_ source: DeviceBuffer, rows sourceRows: [Int], to destination: DeviceBuffer,
                         rows destinationRows: [Int], rowLength: Int, toHalf: Bool) throws {
        let s = try cpuBuffer(source, "copyRows source"), d = try cpuBuffer(destination, "copyRows destination")
        try checkRows(s, rows: sourceRows, d, rows: destinationRows, rowLength: rowLength, halfSide: toHalf ? 0 : 1)
        guard rowLength > 0, !sourceRows.isEmpty else { return }
        let sp = UnsafeRawPointer(s.pointer), dp = UnsafeMutableRawPointer(d.pointer)
        parallelChunks(sourceRows.count * rowLength, grain: CPUParallel.copyGrain) { r in
            convertRows(sp, rows: sourceRows, dp, rows: destinationRows, rowLength: rowLength, toHalf: toHalf, range: r)
        }
    }
}
