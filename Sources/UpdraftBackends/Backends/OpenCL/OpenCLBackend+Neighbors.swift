// The k-NN candidate filter on OpenCL (Kernels/neighbors.cl), so a batch's search downloads the few
// samples each query must look at instead of every dot product.
import UpdraftCore

extension OpenCLBackend {
    /// For each row r of `dots` (`rows` × `n`), the columns j with `scaledNorms[j] − 2·dots[r, j] ≤
    /// limits[r]` (with float slack: never fewer than the exact comparison allows), up to `capacity`
    /// per row in `indices` (row-major, `rows` × `capacity`, as Int32 bit patterns), and how many
    /// passed in `counts` (`rows`, Int32 bit patterns; above `capacity` the row's list is incomplete).
    /// `counts` must hold zeros.
    public func neighborCandidates(dots: DeviceBuffer, scaledNorms: DeviceBuffer, limits: DeviceBuffer, rows: Int, n: Int,
                                   capacity: Int, counts: DeviceBuffer, indices: DeviceBuffer) throws {
        let k = try kernel("neighbors.cl", "neighbor_candidates")
        try k.setArguments([.buffer(try operand(dots, holds: rows * n, "dot products")),
                            .buffer(try operand(scaledNorms, holds: n, "scaled sample norms")),
                            .buffer(try operand(limits, holds: rows, "limits")),
                            .int(rows), .int(n), .int(capacity),
                            .buffer(try operand(counts, holds: rows, "counts")),
                            .buffer(try operand(indices, holds: rows * capacity, "candidate indices"))])
        try launchElementwise(k, count: rows * n)
    }
}
