import Foundation
import UpdraftBackends
import UpdraftModel
import UpdraftLayers

/// How a CPU tuner measures: the backend (its thread count is part of the stored key), timed calls
/// per candidate (after one untimed call; the best is kept) and where progress lines go. `updraft
/// tune --cpu` hands both CPU tuners the same settings.
public struct CPUTunerSettings {
    public var backend: CPUBackend
    public var repeats: Int
    public var log: (String) -> Void

    public init(backend: CPUBackend, repeats: Int = 3, log: @escaping (String) -> Void = { _ in }) {
        self.backend = backend; self.repeats = repeats; self.log = log
    }
}

/// A CPU tuner (`CPUConvolutionTuner`, `CPUOpTuner`): its settings, and the passes of training it
/// measures, told apart by `distinctKey`.
public protocol CPUTuner {
    var settings: CPUTunerSettings { get set }
    /// The key that makes a pass a problem of its own (shape and pass), or nil for a pass it does not tune.
    static func distinctKey(_ pass: TunedPass) throws -> String?
}

extension CPUTuner {
    var backend: CPUBackend { settings.backend }

    /// The passes training `graph` at `batch` runs (`TunedPass.forTraining`) that this tuner tunes, each
    /// distinct shape key and pass once; the prefix's chunked start (`PrefixChunking`) runs forward at
    /// its chunks' batch, so that is the batch measured for it.
    public static func problems(forTraining graph: NetworkGraph, batch: Int,
                                cacheBytes: Int = PrefixChunking.cacheBudgetBytes) throws -> [TunedPass] {
        try TunedPass.forTraining(graph, batch: batch, cacheBytes: cacheBytes, distinctBy: distinctKey)
    }
}

/// What the CPU tuners (`CPUConvolutionTuner`, `CPUOpTuner`) share: the check of a candidate against
/// the path it would replace, and the best-of-repeats timing on the tuners' clock.
enum TunerMeasurement {
    /// The largest difference of `result` from `reference`, with the reference's largest magnitude,
    /// when it exceeds 1e-4 of that magnitude (the candidate is then left out); nil when it agrees.
    static func mismatch(_ result: [Float], _ reference: [Float]) -> (difference: Float, scale: Float)? {
        let scale = max(reference.map(abs).max() ?? 1, 1e-30)
        let difference = zip(reference, result).map { abs($0 - $1) }.max() ?? 0
        return difference <= 1e-4 * scale ? nil : (difference, scale)
    }

    /// The best of `repeats` rounds per candidate, in milliseconds: each round selects every candidate
    /// in turn (`select`) and times one `run`.
    static func bestTimes<C: Hashable>(_ candidates: [C], repeats: Int, threads: Int, select: (C) -> Void,
                                       run: () throws -> Void) rethrows -> [C: Double] {
        var best: [C: Double] = [:]
        for _ in 0..<max(1, repeats) {
            for c in candidates {
                select(c)
                let start = milliseconds(threads: threads)
                try run()
                best[c] = min(best[c] ?? .infinity, milliseconds(threads: threads) - start)
            }
        }
        return best
    }

    /// With one thread, the thread's CPU time (steadier on a loaded machine); else wall time.
    static func milliseconds(threads: Int) -> Double {
        guard threads == 1 else { return Double(DispatchTime.now().uptimeNanoseconds) / 1e6 }
        var t = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
        return Double(t.tv_sec) * 1e3 + Double(t.tv_nsec) / 1e6
    }
}
