import Foundation
import UpdraftData

/// Elapsed time, throughput and time left of a training run, from the mini-batches done so far:
/// what the progress line shows. The rate is measured over the recent mini-batches (a sliding
/// window), so a slow first epoch (the feature cache filling) does not keep the estimate high.
public struct ProgressEstimate: Sendable {
    /// Mini-batches in the whole run, and examples in each.
    public let totalBatches: Int
    /// Examples per mini-batch (for the examples-per-second rate); at least 0.
    public let batchSize: Int
    /// When training began (seconds on any monotonic clock).
    public let start: Double
    /// Recent (time, mini-batches done) samples, oldest first.
    private var samples: [(time: Double, done: Int)] = []
    /// How many samples the rate is measured over.
    public var window = 32

    /// An estimate for a run of `totalBatches` mini-batches of `batchSize` examples that began at `start` (negative counts become 0).
    public init(totalBatches: Int, batchSize: Int, start: Double) {
        self.totalBatches = max(0, totalBatches); self.batchSize = max(0, batchSize); self.start = start
    }

    /// Notes that `done` mini-batches of the run are complete at `time`. A resumed run may start at
    /// any `done`; only the batches trained here count towards the rate.
    public mutating func record(done: Int, at time: Double) {
        if samples.isEmpty { samples.append((start, done - 1 < 0 ? 0 : done - 1)) }
        samples.append((time, done))
        if samples.count > window + 1 { samples.removeFirst(samples.count - window - 1) }
    }

    /// Mini-batches complete, as last recorded.
    public var done: Int { samples.last?.done ?? 0 }

    /// Seconds since training began, at the last record.
    public var elapsed: Double { (samples.last?.time ?? start) - start }

    /// Examples per second over the recent window; nil before two records span any time.
    public var examplesPerSecond: Double? {
        guard let first = samples.first, let last = samples.last, last.time > first.time, last.done > first.done else { return nil }
        return Double((last.done - first.done) * batchSize) / (last.time - first.time)
    }

    /// Seconds left at the recent rate; nil until there is a rate.
    public var remaining: Double? {
        guard let rate = examplesPerSecond, rate > 0 else { return nil }
        return Double(max(0, totalBatches - done) * batchSize) / rate
    }

    /// `m:ss`, or `h:mm:ss` from an hour; `-` for an unknown or absurd duration.
    public static func clock(_ seconds: Double?) -> String {
        guard let seconds, seconds.isFinite, seconds >= 0, seconds < 1e8 else { return "-" }
        let s = Int(seconds.rounded())
        return s >= 3600 ? String(format: "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60)
            : String(format: "%d:%02d", s / 60, s % 60)
    }

    /// "elapsed 1:02  ETA 3:04  812 images/s" (what is known so far).
    public var summary: String {
        var parts = ["elapsed \(Self.clock(elapsed))", "ETA \(Self.clock(remaining))"]
        if let rate = examplesPerSecond { parts.append(String(format: "%.1f images/s", rate)) }
        return parts.joined(separator: "  ")
    }
}
