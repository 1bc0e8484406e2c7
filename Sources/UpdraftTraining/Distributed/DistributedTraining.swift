import Foundation
import UpdraftCore
import UpdraftData

/// Data-parallel training across the processes of an MPI job (`mpirun -np N updraft train ...`, or
/// `UpdateConfiguration.distributed` from Swift). Every rank holds the same model; each global
/// mini-batch (the same shuffled, seeded plan on every rank) is split by example index — rank r trains
/// the examples whose index ≡ r (mod N), so it decodes and caches only those — the gradients are summed
/// over the ranks deterministically (`MPIWorld.deterministicSum`, bucket by bucket as backward produces
/// them), and every rank applies the same update. Rank 0 alone writes checkpoints; the command line
/// also writes the model, history and log and prints progress on rank 0 only.
public struct DistributedTraining {
    /// The MPI job this process is a rank of.
    public let world: MPIWorld
    /// Gradient bytes per exchange: backward hands over a bucket as soon as the layers in it are done,
    /// while the layers before them are still computing (`UPDRAFT_MPI_BUCKET_KIB`, default 1024).
    public var bucketBytes: Int

    /// A device failure to inject into one rank (tests; `UPDRAFT_TEST_FAIL_RANK`, read by `launched()`).
    public var injectedFailure: InjectedRankFailure?

    /// Environment variable giving `bucketBytes` in KiB (1...2^30-1) for `launched()`.
    public static let bucketVariable = "UPDRAFT_MPI_BUCKET_KIB"

    /// Training over `world`, exchanging gradients in buckets of `bucketBytes` (default 1 MiB, at least 4).
    public init(world: MPIWorld, bucketBytes: Int = 1 << 20, injectedFailure: InjectedRankFailure? = nil) {
        self.world = world; self.bucketBytes = max(4, bucketBytes); self.injectedFailure = injectedFailure
    }

    /// The job this process was launched into by mpirun, joining MPI; nil when not launched by an
    /// MPI launcher (then nothing about MPI is touched).
    public static func launched(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> DistributedTraining? {
        guard MPIWorld.isLaunched(environment: environment) else { return nil }
        var bytes = 1 << 20
        if let v = environment[bucketVariable] {
            guard let kib = Int(v), kib > 0, kib < 1 << 30 else {
                throw UpdraftError(.invalidArgument, "\(bucketVariable) must be a number of KiB above 0, got '\(v)'")
            }
            bytes = kib << 10
        }
        let injected = try InjectedRankFailure.requested(environment)
        let world = try MPIWorld.join(environment: environment)
        if let injected, injected.rank >= world.size {
            throw UpdraftError(.invalidArgument, "\(InjectedRankFailure.variable) names rank \(injected.rank), and the job has \(world.size) ranks",
                               hint: "name a rank below \(world.size), or unset it")
        }
        return DistributedTraining(world: world, bucketBytes: bytes, injectedFailure: injected)
    }

    /// This process's rank in the job, 0..<size.
    public var rank: Int { world.rank }
    /// Number of ranks in the job.
    public var size: Int { world.size }
    /// Whether this rank writes files and prints progress.
    public var isPrimary: Bool { world.rank == 0 }

    /// The rank that trains example `index`.
    public func owner(ofExample index: Int) -> Int { index % world.size }

    /// This rank's examples of a global mini-batch (in the batch's order), and every rank's weight in
    /// the batch's gradient: its share of the examples.
    func share(of batch: [Int]) -> (local: [Int], weights: [Double]) {
        Self.share(of: batch, rank: world.rank, size: world.size)
    }

    static func share(of batch: [Int], rank: Int, size: Int) -> (local: [Int], weights: [Double]) {
        var counts = [Int](repeating: 0, count: size)
        var local: [Int] = []
        for i in batch {
            let r = i % size
            counts[r] += 1
            if r == rank { local.append(i) }
        }
        return (local, counts.map { Double($0) / Double(max(1, batch.count)) })
    }

    /// Checks that every rank trains the same thing (data size, plan, model): a mismatch would make
    /// the collectives disagree, so it ends every rank with an error naming the difference.
    func checkAgreement(_ facts: [(String, Double)]) throws {
        let all = try world.run("the start of training") { [world] in try world.allgather(facts.map(\.1)) }
        for (r, theirs) in all.enumerated() {
            for (k, fact) in facts.enumerated() where theirs[k] != fact.1 {
                throw UpdraftError(.ranks, "\(world.name): rank \(r) has \(fact.0) \(theirs[k]), this rank \(fact.1)",
                                   hint: "give every rank the same model, data and options")
            }
        }
    }

    /// Every rank's line (a plan summary, a device), rank by rank.
    public func gather(_ line: String) throws -> [String] {
        try world.run("gathering the ranks' plans") { [world] in try world.allgather(line) }
    }

    /// Every rank's numbers (the same count on each), rank by rank.
    public func gather(_ values: [Double]) throws -> [[Double]] {
        try world.run("gathering the ranks' figures") { [world] in try world.allgather(values) }
    }

    /// Measured point-to-point bandwidth of the exchange: `deterministicSum` over `bytes` of gradients,
    /// timed over a few rounds (every rank must call it). Returns seconds per exchange and the bus
    /// bandwidth in bytes/s (2(N-1)/N of the vector crosses each rank's link, as in a ring allreduce).
    public func measureExchange(bytes: Int, rounds: Int = 5) throws -> (seconds: Double, busBytesPerSecond: Double) {
        let values = [Float](repeating: 1, count: max(1, bytes / 4))
        let weights = [Double](repeating: 1 / Double(world.size), count: world.size)
        return try world.run("the bandwidth measurement") { [world] in
            _ = try world.deterministicSum(values, weights: weights)   // warm-up (connections)
            let start = Date()
            for _ in 0..<rounds { _ = try world.deterministicSum(values, weights: weights) }
            let local = Date().timeIntervalSince(start) / Double(rounds)
            // The slowest rank's time is the exchange's time.
            let seconds = try world.allgather([local]).map { $0[0] }.max() ?? local
            let moved = 2 * Double(world.size - 1) / Double(world.size) * Double(values.count * 4)
            return (seconds, seconds > 0 ? moved / seconds : 0)
        }
    }

    /// Seconds one exchange of `bytes` of gradients takes over N ranks at `busBytesPerSecond`
    /// (bandwidth term of a ring allreduce: 2(N-1)/N of the bytes per link).
    public static func exchangeSeconds(bytes: Int, ranks: Int, busBytesPerSecond: Double) -> Double {
        guard ranks > 1, busBytesPerSecond > 0 else { return 0 }
        return 2 * Double(ranks - 1) / Double(ranks) * Double(bytes) / busBytesPerSecond
    }
}
