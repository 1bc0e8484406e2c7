import Foundation
import UpdraftCore
import UpdraftBackends
import UpdraftModel
import UpdraftLayers
import UpdraftData

/// Where a run's training steps spend their time, per layer and pass (`UpdateConfiguration.reporting.profile`,
/// `updraft train --profile`, `updraft-bench epochs --profile`): wall time, the work done (GFLOP:
/// convolutions always count direct convolution's multiply-adds, so a Winograd layer can show more
/// than 100% of the SGEMM rate), GFLOP/s, the share of the device's SGEMM rate, and the engine that
/// ran it. Profiling waits for each pass to finish (so a queued device loses its overlap): use it to
/// see where time goes, not to measure throughput. The rows add up to the steps' measured wall time
/// but for `otherMilliseconds` (preparing batches, host-side bookkeeping), shown as its own row.
public struct TrainingProfile: Codable, Sendable, Equatable {
    /// One layer's pass: "input" (uploading the batch), "forward", "loss", "backward" (its gradients),
    /// "update" (the optimizer on its parameters).
    public struct Row: Codable, Sendable, Equatable {
        public var layer: String
        public var pass: String
        /// The backend's name.
        public var device: String
        /// What ran it (an algorithm or library the backend chose for the shape, or its own loops).
        public var engine: String
        /// Total over the profiled steps.
        public var milliseconds: Double
        public var calls: Int
        /// Floating-point work over the profiled steps, in GFLOP (a multiply-add counts 2).
        public var gflop: Double

        /// The achieved rate; nil for passes that count no floating-point work.
        public var gflops: Double? { gflop > 0 && milliseconds > 0 ? gflop / milliseconds * 1e3 : nil }
    }

    /// In the order the passes first ran.
    public var rows: [Row]
    /// Training steps profiled.
    public var steps: Int
    /// Their measured wall time, in total.
    public var stepMilliseconds: Double
    /// Each device's SGEMM rate (`measureSGEMM`, taken when the run ended), by backend name: what a
    /// row's GFLOP/s is compared with.
    public var sgemmGFLOPS: [String: Double] = [:]

    /// Time in the rows.
    public var accountedMilliseconds: Double { rows.reduce(0) { $0 + $1.milliseconds } }
    /// Step time outside every row: preparing batches, bookkeeping between passes.
    public var otherMilliseconds: Double { max(0, stepMilliseconds - accountedMilliseconds) }

    /// A row's rate as a percentage of its device's SGEMM rate.
    public func percentOfSGEMM(_ row: Row) -> Double? {
        guard let rate = row.gflops, let sgemm = sgemmGFLOPS[row.device], sgemm > 0 else { return nil }
        return 100 * rate / sgemm
    }

    /// What `backend`'s SGEMM delivers now: its inner product on SqueezeNet conv10's GEMM shape
    /// (M = 64·14·14, N = 1000, K = 512: 12.8 GFLOP), best of three after one warm-up; nil for the
    /// reference backend (too slow to be worth it) or when the backend cannot run it. Measured on the
    /// device under any wrappers (`ForwardingBackend`), so its 78 MB of operands never count in a
    /// measuring wrapper's peak (`updraft-bench epochs --profile` showed 74 MiB more backend buffers).
    public static func measureSGEMM(on wrapped: Backend) -> Double? {
        let backend = wrapped.innermost
        guard !(backend is ReferenceBackend) else { return nil }
        let g = InnerProductGeometry(batch: 64 * 14 * 14, inputChannels: 512, outputChannels: 1000, hasBias: false)
        guard let x = try? backend.makeBuffer(Tensor(shape: g.inputShape, uniformIn: 0...1, seed: 1)),
              let w = try? backend.makeBuffer(Tensor(shape: g.weightShape, uniformIn: -1...1, seed: 2)),
              let y = try? backend.makeBuffer(count: g.outputShape.count) else { return nil }
        var best = Double.infinity
        for i in 0..<4 {
            let start = DispatchTime.now().uptimeNanoseconds
            guard (try? backend.innerProductForward(g, input: x, weights: w, bias: nil, output: y)) != nil,
                  (try? backend.synchronize()) != nil else { return nil }
            if i > 0 { best = min(best, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9) }
        }
        return g.forwardCost.flops / best / 1e9
    }

    /// What happened after `earlier` (a profile of the same run taken before, e.g. at the end of the
    /// first epoch): rows, steps and time minus theirs, so the steady state can be read alone.
    public func since(_ earlier: TrainingProfile) -> TrainingProfile {
        var out = self
        out.steps -= earlier.steps
        out.stepMilliseconds -= earlier.stepMilliseconds
        out.rows = rows.compactMap { r in
            guard let e = earlier.rows.first(where: { $0.layer == r.layer && $0.pass == r.pass && $0.device == r.device }) else { return r }
            var d = r
            d.milliseconds -= e.milliseconds; d.calls -= e.calls; d.gflop -= e.gflop
            return d.calls > 0 ? d : nil
        }
        return out
    }

    /// The profile as a table: per row milliseconds per step, share of the step, GFLOP/s, % of SGEMM,
    /// device and engine; then the other time and the totals.
    public func table() -> String {
        let perStep = 1.0 / Double(max(1, steps))
        let layerWidth = max(5, rows.map(\.layer.count).max() ?? 0)
        func pad(_ s: String, _ n: Int) -> String { s + String(repeating: " ", count: max(0, n - s.count)) }
        func left(_ s: String, _ n: Int) -> String { String(repeating: " ", count: max(0, n - s.count)) + s }
        var out = "Profile of \(steps) training step\(steps == 1 ? "" : "s") (ms per step; GFLOP/s counts direct convolution's work"
            + (sgemmGFLOPS.isEmpty ? "" : "; % SGEMM against " + sgemmGFLOPS.sorted { $0.key < $1.key }
                .map { String(format: "%.1f GFLOP/s on %@", $0.value, $0.key) }.joined(separator: ", ")) + ")\n"
        out += pad("layer", layerWidth) + "  pass       ms/step  share   GFLOP/s  % SGEMM  device / engine\n"
        let total = max(stepMilliseconds, 1e-12)
        for r in rows {
            out += pad(r.layer, layerWidth) + "  " + pad(r.pass, 9)
                + left(String(format: "%.3f", r.milliseconds * perStep), 9) + left(String(format: "%.1f%%", 100 * r.milliseconds / total), 7)
                + left(r.gflops.map { String(format: "%.1f", $0) } ?? "-", 10)
                + left(percentOfSGEMM(r).map { String(format: "%.0f%%", $0) } ?? "-", 9)
                + "  " + r.device + " / " + r.engine + "\n"
        }
        out += pad("(other)", layerWidth) + "  " + pad("host", 9) + left(String(format: "%.3f", otherMilliseconds * perStep), 9)
            + left(String(format: "%.1f%%", 100 * otherMilliseconds / total), 7) + "          -        -  batches, bookkeeping\n"
        out += String(format: "rows %.3f ms + other %.3f ms = measured step %.3f ms (rows cover %.1f%%)\n",
                      accountedMilliseconds * perStep, otherMilliseconds * perStep, stepMilliseconds * perStep,
                      100 * accountedMilliseconds / total)
        return out
    }
}

/// Gathers a `TrainingProfile` while executors run (`Executor.profiler`); thread-safe, so data-parallel
/// replicas may share one.
public final class TrainingProfiler: @unchecked Sendable {
    private struct Key: Hashable { var layer: String, pass: String, device: String }
    private let lock = NSLock()
    private var rows: [Key: TrainingProfile.Row] = [:]
    private var order: [Key] = []
    private var steps = 0
    private var stepSeconds = 0.0

    public init() {}

    /// Runs `body` (one layer's pass on `backend`), waits for the backend, and adds the time to the
    /// row; `engine` and `flops` are asked only once per row or call.
    func measure<T>(layer: String, pass: String, backend: Backend, engine: () -> String, flops: () -> Double,
                    _ body: () throws -> T) throws -> T {
        let start = DispatchTime.now().uptimeNanoseconds
        let result = try body()
        try backend.synchronize()
        let ms = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
        let key = Key(layer: layer, pass: pass, device: backend.name)
        let work = flops() / 1e9
        lock.lock(); defer { lock.unlock() }
        if rows[key] == nil {
            rows[key] = TrainingProfile.Row(layer: layer, pass: pass, device: backend.name, engine: engine(),
                                            milliseconds: 0, calls: 0, gflop: 0)
            order.append(key)
        }
        rows[key]!.milliseconds += ms
        rows[key]!.calls += 1
        rows[key]!.gflop += work
        return result
    }

    /// Counts one training step of `seconds` wall time (the session measures it around the whole step).
    func recordStep(seconds: Double) {
        lock.lock(); defer { lock.unlock() }
        steps += 1
        stepSeconds += seconds
    }

    /// Forgets everything gathered (to profile only the steady state, after a first epoch).
    public func reset() {
        lock.lock(); defer { lock.unlock() }
        rows = [:]; order = []; steps = 0; stepSeconds = 0
    }

    /// What was gathered so far, with the SGEMM rates of `sgemmOn`'s backends measured now (none by default).
    public func profile(sgemmOn backends: [Backend] = []) -> TrainingProfile {
        var rates: [String: Double] = [:]
        for b in backends where rates[b.name] == nil { rates[b.name] = TrainingProfile.measureSGEMM(on: b) }
        lock.lock(); defer { lock.unlock() }
        return TrainingProfile(rows: order.compactMap { rows[$0] }, steps: steps, stepMilliseconds: stepSeconds * 1e3,
                               sgemmGFLOPS: rates)
    }
}

extension Executor {
    /// Runs one layer's pass through the profiler when there is one (see `TrainingProfiler.measure`);
    /// else just `body`.
    func profiled<T>(_ layer: GraphLayer?, _ pass: String, on backend: Backend, batch: Int, inputGradient: Bool = false,
                     _ body: () throws -> T) throws -> T {
        guard let profiler else { return try body() }
        let name = layer?.name ?? pass
        return try profiler.measure(layer: name, pass: pass, backend: backend, engine: {
            guard let layer, pass == "forward" || pass == "backward" else {
                return pass == "update" ? "\(optimizer.name), \(backend.ownEngine)" : backend.ownEngine
            }
            return layer.op.kind.engine(layer, batch: batch, backward: pass == "backward", inputGradient: inputGradient, on: backend)
        }, flops: {
            guard let layer, pass == "forward" || pass == "backward" else { return 0 }
            let updatable = graph.updatableLayers.contains { $0.name == layer.name }
            guard let work = try? layer.op.kind.work(layer, batch: batch, optimizer: .sgd,
                                                     backwardData: inputGradient, backwardWeights: updatable) else { return 0 }
            return LayerWork.total(pass == "forward" ? work.forward : work.backwardData + work.backwardWeights).flops
        }, body)
    }

    /// The optimizer's pass on one layer's tensors, through the profiler when there is one.
    func profiledUpdate(layer name: String, counts: [Int], _ body: () throws -> Void) throws {
        guard let profiler else { return try body() }
        try profiler.measure(layer: name, pass: "update", backend: tailBackend, engine: { "\(optimizer.name), \(tailBackend.ownEngine)" },
                             flops: { counts.reduce(0) { $0 + optimizer.stepCost(count: $1).flops } }, body)
    }
}
