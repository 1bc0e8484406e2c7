import Foundation
import UpdraftCore
import UpdraftBackends
import UpdraftModel

/// Checks, before the first batch, that the executor's memory fits: on each device its estimated
/// footprint (the scheduler's estimate, `GraphAnalysis`), and in host memory what the host holds
/// (everything, for the CPU backends and PoCL; the batch being loaded and a copy of the trained
/// state, for a GPU). A mini-batch that does not fit is a named error that says the largest one that
/// does, instead of an allocator failure, or the OOM killer, after minutes of loading.
public enum MemoryPreflight {
    /// What the batches are for, which decides what must fit: training (activations, gradients, optimizer state) or forward-only evaluation or prediction.
    public enum Work: String, Sendable {
        /// Training holds activations, gradients and optimizer state; evaluation and prediction hold only the forward pass.
        case training, evaluation, prediction
    }

    /// Share of a device's memory, or of the host's available memory, the estimate may fill.
    public static let headroom = 0.9

    /// Bytes a batch of `batch` needs: on the prefix backend, on the tail backend (one figure when
    /// they are the same object), in host memory, and the largest single tensor.
    package struct Footprint {
        package var prefix: UInt64
        package var tail: UInt64
        package var host: UInt64
        package var largestTensor: UInt64
    }

    package static func footprint(graph: NetworkGraph, batch: Int, work: Work, prefix: Backend, tail: Backend,
                          halfPrecisionPrefix: Bool = false) throws -> Footprint {
        let a = try GraphAnalysis(graph: graph, batch: batch, halfPrecisionPrefix: halfPrecisionPrefix)
        var prefixBytes: UInt64, tailBytes: UInt64
        var largest = UInt64(a.inputBytes)
        for l in a.layers { largest = max(largest, UInt64(l.outputShape.withBatch(batch).count) * 4) }
        if work == .training {
            prefixBytes = a.prefixMemory
            tailBytes = a.tailMemory + (prefix === tail ? 0 : a.boundaryBytes)
        } else {
            // Forward only: buffers go back to the pool once read, so a few activations are alive at
            // a time (a branch and its concat: three of the largest), beside every parameter.
            let parameters = UInt64(graph.parameterCount) * 4
            prefixBytes = parameters + UInt64(a.inputBytes) + 3 * largest
            tailBytes = 0
        }
        if prefix === tail { prefixBytes += tailBytes; tailBytes = 0 }
        // The host holds the batch as examples and as a tensor, and (training) a copy of the state.
        let trained = UInt64(graph.updatableLayers.reduce(0) { $0 + $1.parameterCount }) * 4
        var host = 2 * UInt64(a.inputBytes) + UInt64(a.targetBytes) + (work == .training ? 3 * trained : 0)
        if case .host = prefix.memory { host += prefixBytes }
        if prefix !== tail, case .host = tail.memory { host += tailBytes }
        return Footprint(prefix: prefixBytes, tail: tailBytes, host: host, largestTensor: largest)
    }

    /// Throws `UpdraftError(.device)` when a mini-batch of `batchSize` for `work` does not fit the
    /// memory of `prefix`, `tail` or the host (`hostAvailable` bytes), naming the memory, the
    /// estimate, what is there, and the largest mini-batch that fits. `halfPrecisionPrefix`: the
    /// frozen prefix's activations are halves (`UpdateConfiguration.frozenActivationsHalfPrecision`).
    public static func check(graph: NetworkGraph, batchSize: Int, work: Work, prefix: Backend, tail: Backend,
                             halfPrecisionPrefix: Bool = false, hostAvailable: UInt64 = HostMemory.available()) throws {
        let f = try footprint(graph: graph, batch: batchSize, work: work, prefix: prefix, tail: tail,
                              halfPrecisionPrefix: halfPrecisionPrefix)
        // Each limit as (what, bytes needed, bytes there, the footprint's part for a batch size).
        var limits: [(String, UInt64, UInt64, (Footprint) -> UInt64)] = [
            ("host memory", f.host, hostAvailable, { $0.host }),
        ]
        for (backend, part) in [(prefix, { (x: Footprint) in x.prefix }), (tail, { (x: Footprint) in x.tail })] {
            guard case let .device(bytes, largestBuffer) = backend.memory else { continue }
            limits.append(("\(backend.name) memory", part(f), bytes, part))
            if largestBuffer > 0 { limits.append(("\(backend.name)'s largest buffer", f.largestTensor, largestBuffer, { $0.largestTensor })) }
        }
        for (what, need, have, part) in limits {
            let allowed = what.hasSuffix("buffer") ? Double(have) : Double(have) * headroom
            guard Double(need) > allowed else { continue }
            let fits = largestFitting(allowed: allowed, below: batchSize) {
                part(try footprint(graph: graph, batch: $0, work: work, prefix: prefix, tail: tail,
                                   halfPrecisionPrefix: halfPrecisionPrefix))
            }
            let advice = fits >= 1 ? "the largest mini-batch that fits is \(fits)" : "even a mini-batch of 1 does not fit"
            throw UpdraftError(.device,
                "\(work.rawValue) with a mini-batch of \(batchSize) needs an estimated \(formatBytes(need)) of \(what), which has \(formatBytes(have))\(what == "host memory" ? " available" : ""); \(advice)",
                hint: fits >= 1 ? "pass --batch-size \(fits) or less (MLUpdateTask: a smaller miniBatchSize)"
                    : "use a device with more memory, or a model with a smaller input")
        }
    }

    /// The largest batch size below `below` whose footprint part stays within `allowed` (0 if none):
    /// footprints grow with the batch size, so a binary search.
    static func largestFitting(allowed: Double, below: Int, _ part: (Int) throws -> UInt64) -> Int {
        var lo = 0, hi = below - 1  // lo fits (0 trivially), the answer is in lo...hi
        while lo < hi {
            let mid = lo + (hi - lo + 1) / 2
            if let bytes = try? part(mid), Double(bytes) <= allowed { lo = mid } else { hi = mid - 1 }
        }
        return lo
    }
}

/// Host memory the process may still use.
public enum HostMemory {
    /// The smaller of the kernel's MemAvailable and this process's cgroup limit (a container's
    /// `--memory`), else the physical memory. (Not the limit minus the cgroup's usage: that counts
    /// page cache the kernel gives back on demand.)
    public static func available() -> UInt64 {
        var best = ProcessInfo.processInfo.physicalMemory
        if let text = try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8),
           let line = text.split(separator: "\n").first(where: { $0.hasPrefix("MemAvailable:") }),
           let kib = UInt64(line.split(separator: " ").dropFirst().first ?? "") {
            best = min(best, kib * 1024)
        }
        func number(_ path: String) -> UInt64? {
            (try? String(contentsOfFile: path, encoding: .utf8)).flatMap { UInt64($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        }
        if let limit = number("/sys/fs/cgroup/memory.max") { best = min(best, limit) }
        return best
    }
}
