import Foundation
import UpdraftCore
import UpdraftBackends
import UpdraftModel
import UpdraftLayers

/// `updraft tune --cpu`, pooling and inner products: times Updraft's own pass and oneDNN's on the
/// shapes a model trains with, checks oneDNN's result against the own one first, and keeps oneDNN
/// only where it is more than 3% faster; stored in the same `CPUConvolutionTuning` (same file and
/// machine key) as the convolutions' choices. Runs read the choice and never time anything.
public struct CPUOpTuner: CPUTuner {
    /// Best milliseconds per engine that ran the problem, the choice, and why oneDNN was left out.
    public struct Outcome: Sendable {
        public var problem: TunedPass
        /// The op measured and its pass, as the tuning stores them.
        public var shape: CPUOpShape
        public var pass: CPUOpPass
        public var milliseconds: [CPUOpEngine: Double]
        public var choice: CPUOpEngine
        public var rejected: String?
    }

    /// The backend, repeats and progress lines (`CPUTunerSettings`).
    public var settings: CPUTunerSettings

    public init(settings: CPUTunerSettings) { self.settings = settings }

    /// A problem per distinct pooling or inner-product shape and pass (`problems(forTraining:batch:)`;
    /// pooling in the prefix's chunked start at its chunks' batch).
    public static func distinctKey(_ p: TunedPass) throws -> String? {
        try opShape(p).map { shape, pass in shape.key + " " + pass.rawValue }
    }

    /// The CPU op and pass of a pooling or inner-product pass; nil for another op.
    public static func opShape(_ p: TunedPass) throws -> (CPUOpShape, CPUOpPass)? {
        if let g = try p.poolingGeometry() { return (.pooling(g), p.pass == .forward ? .forward : .backward) }
        if let g = try p.innerProductGeometry() {
            return (.innerProduct(g), p.pass == .forward ? .forward : p.pass == .backwardData ? .backwardData : .backwardWeights)
        }
        return nil
    }

    /// Measures every problem and returns the choices (added to `start`) with what was measured.
    public func tune(_ problems: [TunedPass], start: CPUConvolutionTuning = CPUConvolutionTuning()) throws
        -> (tuning: CPUConvolutionTuning, outcomes: [Outcome]) {
        var tuning = start
        tuning.measuredAt = Date()
        var outcomes: [Outcome] = []
        let saved = backend.opEngineOverride
        defer { backend.opEngineOverride = saved }
        for p in problems {
            let outcome = try measure(p)
            tuning.set(outcome.choice, for: outcome.shape, outcome.pass)
            settings.log(String(format: "%@ %@ %@: %@ (%@)%@", p.layer, outcome.pass.rawValue, outcome.shape.key, outcome.choice.rawValue,
                       outcome.milliseconds.sorted { $0.value < $1.value }.map { String(format: "%@ %.3f ms", $0.key.rawValue, $0.value) }
                           .joined(separator: ", "),
                       outcome.rejected.map { "; oneDNN left out: " + $0 } ?? ""))
            outcomes.append(outcome)
        }
        return (tuning, outcomes)
    }

    private func measure(_ p: TunedPass) throws -> Outcome {
        guard let (shape, pass) = try Self.opShape(p) else {
            throw UpdraftError(.invalidArgument, "the CPU op tuner was given \(p)", hint: "pass it pooling and inner-product passes only")
        }
        let call = try Self.call(backend, shape, pass)
        var engines: [CPUOpEngine] = [.own]
        var rejected: String?
        backend.opEngineOverride = .own
        try call.run()
        let reference = try backend.download(call.output)
        if backend.oneDNNImplementation(shape, pass) != nil {
            backend.opEngineOverride = .onednn
            try call.run()
            if let m = TunerMeasurement.mismatch(try backend.download(call.output), reference) {
                rejected = "differs from the own path by \(m.difference) (largest output \(m.scale))"
            } else {
                engines.append(.onednn)
            }
        } else if let reason = OneDNN.unavailableReason {
            rejected = reason
        } else {
            rejected = "oneDNN has no primitive for the shape as Updraft defines it"
        }
        let best = try TunerMeasurement.bestTimes(engines, repeats: settings.repeats, threads: backend.threadCount,
                                                  select: { backend.opEngineOverride = $0 }, run: call.run)
        // The own path keeps the shape unless oneDNN is more than 3% faster (timing noise).
        let choice: CPUOpEngine = (best[.onednn].map { $0 * 1.03 < best[.own]! } ?? false) ? .onednn : .own
        return Outcome(problem: p, shape: shape, pass: pass, milliseconds: best, choice: choice, rejected: rejected)
    }

    /// One pass on random operands: `run` calls it, `output` holds what it computes (dx, dw, y).
    static func call(_ backend: CPUBackend, _ shape: CPUOpShape, _ pass: CPUOpPass) throws
        -> (run: () throws -> Void, output: DeviceBuffer) {
        func random(_ shape: Shape, _ seed: UInt64) throws -> DeviceBuffer {
            try backend.makeBuffer(Tensor(shape: shape, uniformIn: -1...1, seed: seed))
        }
        switch shape {
        case let .pooling(g):
            let x = try random(g.inputShape, 1), y = try backend.makeBuffer(count: g.outputShape.count)
            if pass == .forward { return ({ try backend.poolingForward(g, input: x, output: y) }, y) }
            let dy = try random(g.outputShape, 2), dx = try backend.makeBuffer(count: g.inputShape.count)
            return ({ try backend.poolingBackward(g, input: x, output: y, outputGradient: dy, inputGradient: dx) }, dx)
        case let .innerProduct(g):
            let x = try random(g.inputShape, 1), w = try random(g.weightShape, 3), dy = try random(g.outputShape, 2)
            let b = g.hasBias ? try random([g.outputChannels], 4) : nil
            switch pass {
            case .forward, .backward:
                let y = try backend.makeBuffer(count: g.outputShape.count)
                return ({ try backend.innerProductForward(g, input: x, weights: w, bias: b, output: y, epilogue: nil) }, y)
            case .backwardData:
                let dx = try backend.makeBuffer(count: g.inputShape.count)
                return ({ try backend.innerProductBackwardData(g, outputGradient: dy, weights: w, inputGradient: dx) }, dx)
            case .backwardWeights:
                let dw = try backend.makeBuffer(count: g.weightShape.count)
                let db = g.hasBias ? try backend.makeBuffer(count: g.outputChannels) : nil
                return ({ try backend.innerProductBackwardWeights(g, input: x, outputGradient: dy, weightGradient: dw, biasGradient: db) }, dw)
            }
        }
    }
}
