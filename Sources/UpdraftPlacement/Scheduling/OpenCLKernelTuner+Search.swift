import Foundation
import UpdraftCore
import UpdraftBackends

/// How much of the variant space `updraft tune` searches.
public enum KernelTuningSpace: String, CaseIterable, Sendable {
    /// Three in-house tilings besides the table (one with a k unroll, one unpadded, one reading
    /// global memory directly with a k unroll), and CLBlast: proves the machinery (CI on PoCL).
    case tiny
    /// The device's table tilings and the common GPU shapes, padding on/off, k unroll 2/4/8 and global
    /// reads (no local staging) of the table's tiling, global reads of the small tiling, split-K 1/4/16, CLBlast.
    case quick
    /// Every well-formed tiling of 16..128 tiles, 8..32 deep slices, 1..8 outputs per work-item and
    /// each vector width, padding on/off; each also with k unroll 2/4/8 and with global reads (with and
    /// without an unroll of 4); split-K 1/2/4/8/16/32, CLBlast.
    case full

    /// The whole search's time budget by default, seconds (the tuner stops there and keeps the best so far).
    public var defaultBudgetSeconds: Double {
        switch self {
        case .tiny: return 60
        case .quick: return 90
        case .full: return 900
        }
    }
}

/// The on-device search (`updraft tune`): for each problem, every candidate variant is built, checked
/// against the reference on a small problem of the same kind, then timed on the problem itself
/// (wall clock, enough repetitions for ~20 ms, best of 3); the fastest per shape class wins. Problems
/// run largest first, each with an equal share of the budget left (what one leaves goes to the next);
/// within a share, candidates run table first, then CLBlast, split-K, and tilings most promising first.
public struct KernelTuner {
    /// The device the candidates are built and timed on (each candidate gets its own `OpenCLBackend` on it).
    public let context: OpenCLContext
    /// Which candidates are searched.
    public var space: KernelTuningSpace
    /// The whole search's time budget in seconds; the largest problem's table variant is timed however small it is.
    public var budgetSeconds: Double
    /// Whether CLBlast is among the candidates.
    public var includeCLBlast = true
    /// Progress lines (one per problem).
    public var log: (String) -> Void = { _ in }

    /// A tuner for `context`'s device; `budgetSeconds` defaults to `space.defaultBudgetSeconds`.
    public init(context: OpenCLContext, space: KernelTuningSpace, budgetSeconds: Double? = nil) {
        self.context = context
        self.space = space
        self.budgetSeconds = budgetSeconds ?? space.defaultBudgetSeconds
    }

    /// What the search found for one problem.
    public struct Outcome {
        /// The problem that was searched.
        public var problem: KernelTuningProblem
        /// The table's variant's seconds (nil if it was not timed: out of budget).
        public var tableSeconds: Double?
        /// The winner (nil: the table) and its seconds.
        public var best: KernelVariant?
        /// Seconds of the winner on the problem (the table's when no candidate beat it); best of 3 timings.
        public var bestSeconds: Double?
        /// CLBlast's seconds (the faster of its two ways on weight gradients), nil when CLBlast was not
        /// timed (excluded, refused or out of budget).
        public var clblastSeconds: Double?
        /// Candidates timed, the table included (rejected ones are not counted).
        public var timed: Int
        /// Candidates that failed to build, to run or to match the reference, with the reason.
        public var rejected: [(KernelVariant, String)]
    }

    /// The result of a whole search: what `updraft tune` stores and prints.
    public struct Report {
        /// The calibration-cache entry to store: winning variants and measurements by shape class.
        public var entry: KernelTuningEntry
        /// The calibration-cache key of the entry (`KernelTuningStore.key`: device, driver and kernel source hash).
        public var key: String
        /// One outcome per problem searched, largest problem first.
        public var outcomes: [Outcome]
        /// Wall-clock seconds the search took.
        public var seconds: Double
        /// Problems left with the table because the budget ran out.
        public var skipped: [KernelTuningProblem]
    }

    /// The table's tuning for this device (no stored variants): what the candidates are measured against.
    var baseTuning: OpenCLTuning { OpenCLTuning.forDevice(context.device.info) }

    /// Candidates for `shape`, most promising first; nil is the table's own choice.
    public func candidates(for shape: KernelShape) -> [KernelVariant?] {
        let info = context.device.info
        let base = baseTuning
        let tableTiling = base.gemmTiling(rows: shape.rows, columns: shape.columns, slabs: shape.slabs,
                                          splittable: shape.splittable && shape.depth > 1024)
        var tilings: [GemmTiling]
        var splits: [Int] = []
        switch space {
        case .tiny:
            var unpadded = GemmTiling.small; unpadded.padding = 0
            tilings = [GemmTiling.tiny.with(kUnroll: 4), unpadded, GemmTiling.small.with(kUnroll: 2, stageLocal: false)]
        case .quick:
            var unpadded = tableTiling; unpadded.padding = 0
            tilings = base.gemmTilings + [.large, .wide64, .medium, .small, unpadded]
                + [2, 4, 8].map { tableTiling.with(kUnroll: $0) }
                + [tableTiling.with(stageLocal: false), GemmTiling.small.with(stageLocal: false)]
            splits = [1, 4, 16]
        case .full:
            tilings = Self.fullSpace
            splits = [1, 2, 4, 8, 16, 32]
        }
        var seen = Set<KernelVariant>(), out: [KernelVariant?] = [nil]
        func add(_ v: KernelVariant) { if seen.insert(v).inserted { out.append(v) } }
        // CLBlast right after the table: a problem's share of the budget may end before the tilings do.
        if includeCLBlast && shape.clblastCan {
            add(.clblast)
            // Weight gradients: batched slabs (above) or one GEMM per image adding into dw.
            if shape.kind == .convBackwardWeights { add(.clblastPerImage) }
        }
        if shape.splittable { for s in splits { add(.inHouse(tableTiling, splits: s)) } }
        for t in tilings where t.isWellFormed && t.fits(info) && t != tableTiling { add(.inHouse(t)) }
        return out
    }

    /// Every well-formed tiling of the full space, those nearest 256 work-items and 8x8 per item first
    /// (then the staged slice unrolled whole, padded, with vectors of 4; global reads last).
    static var fullSpace: [GemmTiling] {
        var out: [GemmTiling] = []
        func addVariants(_ t: GemmTiling) {
            out.append(t)
            guard t.padding == 1 else { return }
            for u in [2, 4, 8] where t.tileK % u == 0 { out.append(t.with(kUnroll: u)) }
            out.append(t.with(stageLocal: false))
            if t.tileK % 4 == 0 { out.append(t.with(kUnroll: 4, stageLocal: false)) }
        }
        for tm in [16, 32, 64, 128] { for tn in [16, 32, 64, 128] { for tk in [8, 16, 32] {
            for wm in [1, 2, 4, 8] where tm % wm == 0 { for wn in [1, 2, 4, 8] where tn % wn == 0 {
                for vm in [1, 2, 4] where wm % vm == 0 { for vn in [1, 2, 4] where wn % vn == 0 {
                    for pad in [1, 0] {
                        let t = GemmTiling(tileM: tm, tileN: tn, tileK: tk, workM: wm, workN: wn, vectorM: vm, vectorN: vn, padding: pad)
                        if t.isWellFormed && (32...1024).contains(t.threads) { addVariants(t) }
                    }
                } }
            } }
        } } }
        return out.sorted { score($0) < score($1) }
    }

    private static func score(_ t: GemmTiling) -> Double {
        abs(log2(Double(t.threads) / 256)) + abs(log2(Double(t.workM * t.workN) / 64)) / 2 + Double(1 - t.padding) / 4
            + Double(8 - t.vectorM - t.vectorN) / 16 + (t.kUnroll == 0 ? 0 : 0.3) + (t.stageLocal ? 0 : 0.5)
    }

    // MARK: The search

    /// Tunes `problems` and returns what won, without storing it.
    public func run(_ problems: [KernelTuningProblem]) throws -> Report {
        let start = DispatchTime.now().uptimeNanoseconds
        func elapsed() -> Double { Double(DispatchTime.now().uptimeNanoseconds - start) * 1e-9 }
        let info = context.device.info
        let table = OpenCLBackend(context: context, tuning: baseTuning)
        var outcomes: [Outcome] = [], skipped: [KernelTuningProblem] = []
        var verdicts: [String: String?] = [:]         // check key + variant → nil (passed) or the failure
        var references: [String: [Double]] = [:]
        let ordered = problems.sorted(by: { $0.flops > $1.flops })
        for (index, problem) in ordered.enumerated() {
            // The largest problem is measured however small the budget (its table at least).
            guard index == 0 || elapsed() < budgetSeconds else { skipped.append(problem); continue }
            // An equal share of what is left (time a problem does not use goes to the next ones), so
            // the first, largest problems cannot spend the whole budget of a large space.
            let deadline = elapsed() + (budgetSeconds - elapsed()) / Double(ordered.count - index)
            let shape = problem.shape
            let check = try problem.checkProblem()
            let checkKey = check.shape.description
            let buffers = try problem.makeBuffers(table)
            var outcome = Outcome(problem: problem, tableSeconds: nil, best: nil, bestSeconds: nil, clblastSeconds: nil,
                                  timed: 0, rejected: [])
            for candidate in candidates(for: shape) {
                // The table is always timed: it is what a winner must beat.
                if candidate != nil && elapsed() >= deadline { break }
                var tuning = baseTuning
                tuning.forced = candidate
                let cl = OpenCLBackend(context: context, tuning: tuning)
                if let candidate {
                    let key = "\(checkKey) \(candidate)"
                    if verdicts[key] == nil {
                        if references[checkKey] == nil {
                            references[checkKey] = try check.result(on: ReferenceBackend())
                        }
                        verdicts[key] = Self.verify(check, on: cl, reference: references[checkKey]!)
                    }
                    if let failure = verdicts[key] ?? nil {
                        outcome.rejected.append((candidate, failure)); continue
                    }
                }
                let seconds: Double
                do {
                    seconds = try Self.time(cl) { try problem.run(cl, buffers) }
                } catch {
                    if let candidate { outcome.rejected.append((candidate, firstLine(of: error))) }
                    else { throw error }
                    continue
                }
                if let candidate, candidate.engine == .clblast, let reason = cl.gemmWorkspace.clblastRefusals.values.first {
                    outcome.rejected.append((candidate, reason)); continue
                }
                if let candidate, let t = candidate.tiling, cl.gemmWorkspace.unusableTilings.contains(t) {
                    // The table ran instead: the device cannot launch work-groups that large for this kernel.
                    outcome.rejected.append((candidate, "the kernel cannot run \(t.threads) work-items per group here")); continue
                }
                outcome.timed += 1
                if candidate == nil { outcome.tableSeconds = seconds }
                if candidate?.engine == .clblast { outcome.clblastSeconds = min(seconds, outcome.clblastSeconds ?? .infinity) }
                if outcome.bestSeconds.map({ seconds < $0 }) ?? true {
                    outcome.best = candidate; outcome.bestSeconds = seconds
                }
            }
            try table.synchronize()
            log(Self.describe(outcome, info: info))
            outcomes.append(outcome)
        }
        var variants: [String: KernelVariant] = [:], measurements: [String: KernelTuningMeasurement] = [:]
        for o in outcomes {
            guard let bestSeconds = o.bestSeconds else { continue }
            let key = o.problem.shape.classKey
            if let best = o.best { variants[key] = best }
            measurements[key] = KernelTuningMeasurement(shape: o.problem.description, tableSeconds: o.tableSeconds,
                                                        bestSeconds: bestSeconds, clblastSeconds: o.clblastSeconds,
                                                        candidates: o.timed)
        }
        let entry = KernelTuningEntry(variants: variants, measurements: measurements, device: "\(info.platformName): \(info.name)",
                                      driverVersion: info.driverVersion, kernelSourceHash: KernelTuningStore.kernelSourceHash,
                                      space: space.rawValue)
        return Report(entry: entry, key: KernelTuningStore.key(info), outcomes: outcomes, seconds: elapsed(), skipped: skipped)
    }

    /// Tunes `problems` and stores the result in `cache`, replacing the device's previous tuning.
    public func tune(_ problems: [KernelTuningProblem], cache: CalibrationCache) throws -> Report {
        let report = try run(problems)
        try cache.storeTuning(report.entry, key: report.key)
        return report
    }

    /// Nil when `check` on `cl` matches the reference, else why not.
    static func verify(_ check: KernelTuningProblem, on cl: OpenCLBackend, reference: [Double]) -> String? {
        do {
            let got = try check.result(on: cl)
            let error = ComparisonError(got: got, reference: reference, tolerance: .float32)
            return error.ok ? nil : String(format: "differs from the reference on %@ (max abs error %.3g)",
                                           check.shape.description, error.maxAbs)
        } catch {
            return firstLine(of: error)
        }
    }

    /// Seconds per run of `body`: one warm-up (builds), then enough runs for ~20 ms, best of 3.
    static func time(_ cl: OpenCLBackend, _ body: () throws -> Void) throws -> Double {
        try body()
        try cl.synchronize()
        let once = try DeviceCalibration.wallSeconds { try body(); try cl.synchronize() }
        let reps = max(1, min(50, Int(0.02 / once)))
        return try DeviceCalibration.bestOf(3) {
            try DeviceCalibration.wallSeconds {
                for _ in 0..<reps { try body() }
                try cl.synchronize()
            } / Double(reps)
        }
    }

    static func describe(_ o: Outcome, info: OpenCLDeviceInfo) -> String {
        func ms(_ s: Double?) -> String { s.map { String(format: "%.3f ms", $0 * 1e3) } ?? "-" }
        var line = "\(o.problem): table \(ms(o.tableSeconds)), best \(o.best.map { "\($0)" } ?? "the table") \(ms(o.bestSeconds))"
        if let c = o.clblastSeconds { line += ", CLBlast \(ms(c))" }
        line += " (\(o.timed) timed"
        if !o.rejected.isEmpty { line += ", \(o.rejected.count) rejected: \(o.rejected.first!.1)" }
        return line + ")"
    }
}
