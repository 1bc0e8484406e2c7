import Foundation
import UpdraftCore

/// Image training data that can write each example's 8-bit samples straight into a mini-batch's
/// staging memory: the trainer then sends the batch to the device at one byte a sample and applies
/// the model's image scaler there (`Backend.uploadPixels`), with no float tensor per image or per
/// batch on the host. `ImageFolderDataset` adopts it; so can a provider of your own.
///
/// The contract: example `index`'s input (`example(at:)`) is its samples as floats, shape
/// `pixelShape`, unscaled (values 0...255). The trainer may use either and gets the same results.
/// Implement `target(at:)` without decoding: the trainer asks for targets apart from the samples.
public protocol PixelBatchProvider: BatchProvider {
    /// Every example's samples, planar `[C, H, W]`.
    var pixelShape: Shape { get }
    /// Whether `writePixels` gives this provider's examples (false, e.g., when the inputs are scaled
    /// on the host): the trainer then uses `example(at:)`. Default: true.
    var writesPixels: Bool { get }
    /// Writes example `index`'s samples, planar `[C, H, W]`, into `samples` (exactly
    /// `pixelShape.count` bytes). Called on worker threads, so it must be thread-safe.
    func writePixels(at index: Int, into samples: UnsafeMutableBufferPointer<UInt8>) throws
    /// `writePixels(at:into:)` with `augmentation`'s random resized crop for `epoch` (the flips are
    /// the trainer's). Default: without a crop, `writePixels(at:into:)`; a crop throws `.invalidArgument`.
    func writePixels(at index: Int, epoch: Int, augmentation: ImageAugmentation,
                     into samples: UnsafeMutableBufferPointer<UInt8>) throws
}

extension PixelBatchProvider {
    /// True: the samples are the examples' inputs.
    public var writesPixels: Bool { true }

    /// Without a crop, `writePixels(at:into:)`; a crop throws `.invalidArgument`.
    public func writePixels(at index: Int, epoch: Int, augmentation: ImageAugmentation,
                            into samples: UnsafeMutableBufferPointer<UInt8>) throws {
        guard augmentation.randomResizedCrop == nil else {
            throw UpdraftError(.invalidArgument, "this data set cannot apply a random resized crop",
                               hint: "drop the random resized crop, or implement writePixels(at:epoch:augmentation:into:)")
        }
        try writePixels(at: index, into: samples)
    }

    /// Throws unless `samples` holds exactly one example.
    public func checkPixelBuffer(_ samples: UnsafeMutableBufferPointer<UInt8>) throws {
        guard samples.count == pixelShape.count else {
            throw UpdraftError(.invalidArgument, "a buffer of \(samples.count) bytes for an image of \(pixelShape) (\(pixelShape.count) samples)")
        }
    }
}

/// A batch of images as 8-bit samples, `[N, C, H, W]`, with their targets, for `Executor.evaluate(_:)`
/// and `predict(_:blob:)`: sent to the device at a byte a sample and scaled there.
public struct PixelBatch {
    /// `[N, C, H, W]`.
    public let shape: Shape
    /// Each example's target, in batch order.
    public let targets: [TrainingExample.Target]
    package let rows: PixelRows
}

extension PixelBatchProvider {
    /// The examples at `indices` written (in parallel) into one buffer of samples, with their targets.
    /// - Throws: `.invalidArgument` for no indices; what `writePixels` and `target(at:)` throw.
    public func pixelBatch<Indices: Collection>(at indices: Indices) throws -> PixelBatch where Indices.Element == Int {
        let indices = Array(indices)
        guard !indices.isEmpty else { throw UpdraftError(.invalidArgument, "a batch needs at least one example") }
        let pool = PixelStagingPool(rowBytes: pixelShape.count, batchRows: indices.count, keep: 1)
        let lease = pool.lease(rows: indices.count)
        var failures = [Error?](repeating: nil, count: indices.count)
        failures.withUnsafeMutableBufferPointer { out in
            let out = out  // each iteration writes only its own entry (and its own row)
            forkJoin(iterations: indices.count) { k in
                do { try writePixels(at: indices[k], into: lease.staging.row(k)) } catch { out[k] = error }
            }
        }
        if let failure = failures.lazy.compactMap({ $0 }).first { throw failure }
        return PixelBatch(shape: Shape([indices.count] + pixelShape.dims), targets: try indices.map { try target(at: $0) },
                          rows: PixelRows(lease: lease, rows: 0..<indices.count))
    }
}

extension ImageAugmentation {
    /// Applies example `index`'s flips for `epoch` to its planar samples of `shape` `[C, H, W]` in
    /// place: the same permutation `apply(to:epoch:index:)` makes of the float tensor.
    public func flipPixels(_ samples: UnsafeMutableBufferPointer<UInt8>, shape: Shape, epoch: Int, index: Int) {
        let (horizontal, vertical) = flips(epoch: epoch, index: index)
        guard horizontal || vertical, shape.rank >= 2, let base = samples.baseAddress else { return }
        let height = shape.dims[shape.rank - 2], width = shape.dims[shape.rank - 1]
        let plane = height * width
        guard plane > 0 else { return }
        for p in 0..<(samples.count / plane) {
            let start = base + p * plane
            if vertical {
                for y in 0..<(height / 2) {
                    let a = start + y * width, b = start + (height - 1 - y) * width
                    for x in 0..<width { swap(&a[x], &b[x]) }
                }
            }
            if horizontal {
                for y in 0..<height {
                    let row = start + y * width
                    for x in 0..<(width / 2) { swap(&row[x], &row[width - 1 - x]) }
                }
            }
        }
    }
}

/// Host memory for up to `capacity` examples of `rowBytes` 8-bit samples: one mini-batch's images,
/// `[N, C, H, W]`, allocated once and reused through a `PixelStagingPool`.
package final class PixelStaging: @unchecked Sendable {
    package let rowBytes: Int
    package let capacity: Int
    package let base: UnsafeMutablePointer<UInt8>

    init(rowBytes: Int, capacity: Int) {
        self.rowBytes = rowBytes
        self.capacity = capacity
        base = .allocate(capacity: max(1, rowBytes * capacity))
    }

    deinit { base.deallocate() }

    /// Row `r`'s bytes. Rows are disjoint, so threads may fill different rows at once.
    func row(_ r: Int) -> UnsafeMutableBufferPointer<UInt8> {
        precondition(r >= 0 && r < capacity, "PixelStaging: row \(r) outside 0..<\(capacity)")
        return UnsafeMutableBufferPointer(start: base + r * rowBytes, count: rowBytes)
    }
}

/// A staging buffer in use: back to its pool when the last holder lets go.
package final class PixelLease: @unchecked Sendable {
    package let staging: PixelStaging
    private let pool: PixelStagingPool
    init(_ staging: PixelStaging, pool: PixelStagingPool) { self.staging = staging; self.pool = pool }
    deinit { pool.giveBack(staging) }
}

/// Staging buffers reused across mini-batches: a lease takes a free one (or allocates one when all
/// are in use) and gives it back when released; at most `keep` free ones are held, so memory is
/// O(mini-batch x (prefetch depth + a few)) whatever the data set's size.
package final class PixelStagingPool: @unchecked Sendable {
    package let rowBytes: Int
    /// Rows a new buffer gets at least (the mini-batch size), so a buffer serves any batch.
    package let batchRows: Int
    package let keep: Int
    private let lock = NSLock()
    private var free: [PixelStaging] = []
    /// Buffers allocated over the pool's life (tests: reuse means this stops growing).
    package private(set) var allocations = 0

    package init(rowBytes: Int, batchRows: Int, keep: Int) {
        self.rowBytes = rowBytes
        self.batchRows = max(1, batchRows)
        self.keep = max(1, keep)
    }

    /// A buffer of at least `rows` rows.
    package func lease(rows: Int) -> PixelLease {
        lock.lock()
        if let i = free.lastIndex(where: { $0.capacity >= rows }) {
            let s = free.remove(at: i)
            lock.unlock()
            return PixelLease(s, pool: self)
        }
        allocations += 1
        lock.unlock()
        return PixelLease(PixelStaging(rowBytes: rowBytes, capacity: max(rows, batchRows)), pool: self)
    }

    fileprivate func giveBack(_ staging: PixelStaging) {
        lock.lock(); defer { lock.unlock() }
        if free.count < keep { free.append(staging) }
    }
}

/// Consecutive rows of a leased staging buffer: a batch (or a replica's slice of one) of images,
/// `[count, C, H, W]` bytes, ready for `Executor`'s pixel upload. Holds the lease while it lives.
package struct PixelRows {
    package let lease: PixelLease
    package let rows: Range<Int>

    package init(lease: PixelLease, rows: Range<Int>) { self.lease = lease; self.rows = rows }

    package var count: Int { rows.count }
    package var rowBytes: Int { lease.staging.rowBytes }
    /// The rows' bytes; valid while this value (or another holder of the lease) lives.
    package var samples: UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(start: lease.staging.base + rows.lowerBound * rowBytes, count: rows.count * rowBytes)
    }
}

/// How a trainer fills staging rows from a `PixelBatchProvider`: which pool, and how to write one
/// example's samples (crop, then flips) for the epoch.
package struct PixelLoader {
    package let pool: PixelStagingPool
    package let write: (Int, UnsafeMutableBufferPointer<UInt8>) throws -> Void

    /// Loads `provider`'s examples for `epoch` with `augmentation` (its crop and flips).
    package init(provider: PixelBatchProvider, epoch: Int, augmentation: ImageAugmentation, pool: PixelStagingPool) {
        self.pool = pool
        let shape = provider.pixelShape
        write = { index, out in
            try provider.writePixels(at: index, epoch: epoch, augmentation: augmentation, into: out)
            augmentation.flipPixels(out, shape: shape, epoch: epoch, index: index)
        }
    }
}
