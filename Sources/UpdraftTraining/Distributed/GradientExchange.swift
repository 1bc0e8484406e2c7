import Foundation
import UpdraftData

/// One training run's gradient exchange between ranks. The trained tensors are grouped into buckets
/// in the order backward finishes them (last layer first); during a step, each bucket is handed to
/// the MPI queue as soon as backward has produced it (`layerReady`, called by the executor), so its
/// exchange overlaps the backward pass of the layers before it, as PyTorch's DDP does. Buckets are
/// exchanged in the same order on every rank; a rank with nothing to contribute sends zeros with
/// weight 0. `finish` adds each rank's loss and status (so a rank whose device failed makes every
/// rank take the step again, and a rank that failed for good stops them all).
final class GradientExchange {
    let distributed: DistributedTraining
    var world: MPIWorld { distributed.world }
    /// Element count and layer of each trained tensor, in exchange order (`Executor.trainableTensors`).
    let counts: [Int]
    let layers: [String]
    /// Tensor indices per bucket, in the order the buckets are exchanged.
    let buckets: [[Int]]

    private var weights: [Double] = []
    private var values: [[Float]?] = []
    private var submitted = 0
    private var pending: [MPIWorld.Pending<[Float]>] = []
    /// Buckets handed over while backward was still running, and all buckets, over the run.
    private(set) var overlappedBuckets = 0
    private(set) var exchangedBuckets = 0
    private var inBackward = false
    /// Set after a step in which some rank's task was cancelled: every rank stops after that step.
    private(set) var stopAgreed = false
    /// Whether the failure `UPDRAFT_TEST_FAIL_RANK` asks for was injected already (RankAgreement.swift).
    var injectionFired = false
    /// Whether the ranks' states were found apart at an epoch's end (and brought together) already.
    var statesDiffered = false

    enum Status: Double { case ok = 0, deviceFailed = 1, failed = 2 }

    init(distributed: DistributedTraining, tensors: [(layer: String, count: Int)]) {
        self.distributed = distributed
        counts = tensors.map(\.count)
        layers = tensors.map(\.layer)
        buckets = Self.buckets(tensors, bucketBytes: distributed.bucketBytes)
    }

    /// Backward finishes layers last to first: buckets from the end, whole layers each, closed once
    /// they hold `bucketBytes`.
    static func buckets(_ tensors: [(layer: String, count: Int)], bucketBytes: Int) -> [[Int]] {
        var buckets: [[Int]] = [], current: [Int] = [], bytes = 0
        var i = tensors.count - 1
        while i >= 0 {
            var j = i
            while j > 0 && tensors[j - 1].layer == tensors[i].layer { j -= 1 }
            current += Array(j...i)
            bytes += tensors[j...i].reduce(0) { $0 + 4 * $1.count }
            if bytes >= bucketBytes { buckets.append(current); current = []; bytes = 0 }
            i = j - 1
        }
        if !current.isEmpty { buckets.append(current) }
        return buckets
    }

    /// Starts a step in which ranks weigh `weights` (their share of the global batch).
    func begin(weights: [Double]) {
        self.weights = weights
        values = Array(repeating: nil, count: counts.count)
        submitted = 0
        pending = []
    }

    /// Called by the executor when backward has finished `layer`'s parameter gradients.
    func layerReady(_ layer: String, executor: Executor) throws {
        let tensors = executor.trainableTensors()
        for (t, tensor) in tensors.enumerated() where tensor.layer == layer && values[t] == nil {
            values[t] = try executor.tailBackend.download(tensor.slot.gradient)
        }
        inBackward = true
        submitReady()
        inBackward = false
    }

    /// Gives every tensor not handed over yet (all of them when backward ran without the hook).
    func contribute(_ gradients: [[Float]]) {
        for t in values.indices where values[t] == nil { values[t] = gradients[t] }
        submitReady()
    }

    /// Gradients not handed over yet, read from `executor`.
    func contributeRest(from executor: Executor) throws {
        let tensors = executor.trainableTensors()
        for t in values.indices where values[t] == nil { values[t] = try executor.tailBackend.download(tensors[t].slot.gradient) }
        submitReady()
    }

    /// Hands over, in order, every bucket whose tensors are all there.
    private func submitReady() {
        while submitted < buckets.count, buckets[submitted].allSatisfy({ values[$0] != nil }) {
            let flat = buckets[submitted].flatMap { values[$0]! }
            let w = weights
            let b = submitted
            pending.append(world.start("the gradient exchange (bucket \(b + 1) of \(buckets.count))") { [world] in
                try world.deterministicSum(flat, weights: w)
            })
            if inBackward { overlappedBuckets += 1 }
            exchangedBuckets += 1
            submitted += 1
        }
    }

    /// Completes the step's exchange: buckets not handed over go as zeros (a rank without examples, or
    /// whose backward failed), then every rank's (loss, correct, count, status). Returns the summed
    /// gradients and each rank's result, rank by rank.
    func finish(local: Executor.BatchResult, status: Status, stop: Bool = false) throws
        -> (gradients: [[Float]], ranks: [(result: Executor.BatchResult, status: Status)]) {
        for t in values.indices where values[t] == nil { values[t] = [Float](repeating: 0, count: counts[t]) }
        submitReady()
        let facts = [local.loss, Double(local.correct), Double(local.count), status.rawValue, stop ? 1 : 0]
        let gathered = world.start("the exchange of losses") { [world] in try world.allgather(facts) }
        var out = [[Float]](repeating: [], count: counts.count)
        for (b, p) in pending.enumerated() {
            let summed = try p.wait()
            var offset = 0
            for t in buckets[b] { out[t] = Array(summed[offset..<offset + counts[t]]); offset += counts[t] }
        }
        let all = try gathered.wait()
        if all.contains(where: { $0[4] != 0 }) { stopAgreed = true }
        let ranks = all.map { f in
            (Executor.BatchResult(loss: f[0], correct: Int(f[1]), count: Int(f[2])), Status(rawValue: f[3]) ?? .failed)
        }
        return (out, ranks)
    }
}
