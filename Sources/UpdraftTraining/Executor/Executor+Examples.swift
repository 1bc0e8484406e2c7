import Foundation
import UpdraftCore
import UpdraftBackends
import UpdraftLayers
import UpdraftData

/// Float examples (a `BatchProvider`'s `TrainingExample`s) as a batch: their inputs are stacked into
/// the executor's `InputStaging`, one host array reused batch after batch, and uploaded from there.
/// Stacking them into a new `TrainingBatch` per mini-batch cost a fresh array of the batch's size
/// each time (about 20 MB at SqueezeNet's 227x227 in batches of 32, faulted in anew).
extension Executor {
    /// `computeGradients` on float examples, their targets included.
    func computeGradients(examples: [TrainingExample]) throws -> BatchResult {
        try runBatch(targets: examples.map(\.target), layers: training.prefix + training.tail, keep: training.boundary, gradients: true) {
            try uploadInput(examples: examples, ws: $0)
        }
    }

    /// Loss and correct count of float examples (validation).
    func evaluate(examples: [TrainingExample]) throws -> BatchResult {
        try runBatch(targets: examples.map(\.target), layers: training.prefix + training.tail, gradients: false) {
            try uploadInput(examples: examples, ws: $0)
        }
    }

    /// `predict` on float examples, stacked in the staging array rather than a new batch tensor.
    func predict(examples: [TrainingExample], blob: String? = nil) throws -> Tensor {
        try predict(count: examples.count, blob: blob) { try uploadInput(examples: examples, ws: $0) }
    }

    /// Sets the network input of `ws` from the examples' inputs, stacked in the staging array.
    func uploadInput(examples: [TrainingExample], ws: Workspace) throws {
        let itemCount = graph.input.shape.itemCount
        guard examples.count == ws.batch else {
            throw UpdraftError(.invalidArgument, "\(examples.count) examples for a batch of \(ws.batch)")
        }
        for (i, e) in examples.enumerated() {
            if e.input.shape != examples[0].input.shape {
                throw UpdraftError(.data, "example \(i) has input shape \(e.input.shape), the batch has \(examples[0].input.shape)",
                                   hint: "every example must have the same input shape")
            }
            if e.input.count != itemCount {
                throw UpdraftError(.data, "inputs \(e.input.shape) do not match the model input \(graph.input.shape)",
                                   hint: "check the data's shape against `updraft inspect`")
            }
        }
        try uploadInput(values: inputStaging.stack(examples), ws: ws)
    }
}

/// A host array that examples' inputs are stacked in, kept from batch to batch: once it has the
/// room for a mini-batch, stacking one allocates nothing. It counts the times its storage was
/// (re)allocated, which stops growing once it is warm (tests).
final class InputStaging {
    private var values: [Float] = []
    private var storage: UnsafeRawPointer?
    /// Times the staging array got new storage, and the bytes asked for each time.
    private(set) var allocations = 0, allocatedBytes = 0
    /// Batches of at least this many values are stacked on all cores.
    static let parallelFrom = 1 << 18

    /// The examples' inputs one after another. The array returned shares the staging's storage: a
    /// caller that keeps it past the next `stack` only makes that one copy its own.
    func stack(_ examples: [TrainingExample]) -> [Float] {
        let wanted = examples.reduce(0) { $0 + $1.input.count }
        if wanted < Self.parallelFrom {
            values.removeAll(keepingCapacity: true)
            values.reserveCapacity(wanted)
            for e in examples { values.append(contentsOf: e.input.data) }
        } else {
            // A mini-batch of images (SqueezeNet's: 40 MB) is copied by all cores, each example
            // into its place; the array is resized only when the batch's size changes. (A caller
            // that kept the last batch makes the write below copy the storage first, once.)
            if values.count != wanted {
                values.removeAll(keepingCapacity: true)
                values.reserveCapacity(wanted)
                values.append(contentsOf: repeatElement(0, count: wanted))
            }
            var offsets = [0]
            for e in examples { offsets.append(offsets.last! + e.input.count) }
            values.withUnsafeMutableBufferPointer { dst in
                let base = dst.baseAddress!
                let ways = min(examples.count, HostInfo.usableCores)
                forkJoin(iterations: ways) { w in
                    for i in (examples.count * w / ways)..<(examples.count * (w + 1) / ways) {
                        examples[i].input.data.withUnsafeBufferPointer { src in
                            if let from = src.baseAddress { (base + offsets[i]).update(from: from, count: src.count) }
                        }
                    }
                }
            }
        }
        let now = values.withUnsafeBufferPointer { UnsafeRawPointer($0.baseAddress) }
        if now != storage {
            storage = now
            allocations += 1
            // The size asked for, not the capacity the allocator rounded it to (which varies with its state).
            allocatedBytes += wanted * MemoryLayout<Float>.stride
        }
        return values
    }
}
