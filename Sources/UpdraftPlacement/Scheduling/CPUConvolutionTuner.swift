import Foundation
import UpdraftCore
import UpdraftBackends
import UpdraftModel
import UpdraftLayers

/// `updraft tune --cpu`: times each CPU convolution algorithm that can run a layer's pass (im2col +
/// OpenBLAS, Winograd F(2x2) and F(4x4), oneDNN) on the shapes a model trains with, and keeps the
/// fastest per shape and pass as a `CPUConvolutionTuning`, stored under this CPU model, oneDNN version
/// and thread count. Runs then read the stored choice and never time anything themselves.
public struct CPUConvolutionTuner: CPUTuner {
    /// What was measured for one problem: best milliseconds per algorithm that ran it, the choice,
    /// and the algorithms left out because their result disagreed with im2col's.
    public struct Outcome: Sendable {
        public var problem: TunedPass
        /// The convolution measured and its pass, as the tuning stores them.
        public var geometry: ConvGeometry
        public var pass: CPUConvolutionPass
        public var milliseconds: [CPUConvolutionAlgorithm: Double]
        public var choice: CPUConvolutionAlgorithm
        public var builtIn: CPUConvolutionAlgorithm
        public var rejected: [CPUConvolutionAlgorithm: String]
    }

    /// The backend, repeats and progress lines (`CPUTunerSettings`).
    public var settings: CPUTunerSettings

    public init(settings: CPUTunerSettings) { self.settings = settings }

    /// A problem per distinct convolution shape and pass (`problems(forTraining:batch:)`).
    public static func distinctKey(_ p: TunedPass) throws -> String? {
        try p.convolutionGeometry().map { CPUConvolutionTuning.shapeKey($0) + p.passName }
    }

    /// Measures every problem and returns the choices (added to `start`) with what was measured.
    public func tune(_ problems: [TunedPass], start: CPUConvolutionTuning = CPUConvolutionTuning()) throws
        -> (tuning: CPUConvolutionTuning, outcomes: [Outcome]) {
        var tuning = start
        tuning.measuredAt = Date()
        var outcomes: [Outcome] = []
        let saved = (backend.convolutionAlgorithmOverride, backend.convolutionTuning)
        defer { (backend.convolutionAlgorithmOverride, backend.convolutionTuning) = saved }
        backend.convolutionTuning = nil
        for p in problems {
            let outcome = try measure(p)
            tuning.set(outcome.choice, for: outcome.geometry, outcome.pass)
            settings.log(String(format: "%@ %@ %@: %@ (%@)", p.layer, outcome.pass.rawValue, CPUConvolutionTuning.shapeKey(outcome.geometry),
                       outcome.choice.rawValue,
                       outcome.milliseconds.sorted { $0.value < $1.value }.map { String(format: "%@ %.2f ms", $0.key.rawValue, $0.value) }
                           .joined(separator: ", ")))
            outcomes.append(outcome)
        }
        return (tuning, outcomes)
    }

    private func measure(_ p: TunedPass) throws -> Outcome {
        guard let g = try p.convolutionGeometry() else {
            throw UpdraftError(.invalidArgument, "the CPU convolution tuner was given \(p)", hint: "pass it convolution passes only")
        }
        let pass = CPUConvolutionPass(p.pass)
        backend.convolutionAlgorithmOverride = nil
        let builtIn = backend.algorithm(for: g, pass)
        let x = try backend.makeBuffer(Tensor(shape: g.inputShape, uniformIn: 0...1, seed: 1))
        let dy = try backend.makeBuffer(Tensor(shape: g.outputShape, uniformIn: -1...1, seed: 2))
        let w = try backend.makeBuffer(Tensor(shape: g.weightShape, uniformIn: -0.1...0.1, seed: 3))
        let b = g.hasBias ? try backend.makeBuffer(Tensor(shape: [g.outChannels], uniformIn: -0.1...0.1, seed: 4)) : nil
        let db = g.hasBias ? try backend.makeBuffer(count: g.outChannels) : nil
        let out = try backend.makeBuffer(count: [.forward: g.outputShape.count, .backwardData: g.inputShape.count,
                                                 .backwardWeights: g.weightShape.count][pass]!)
        func call() throws {
            switch pass {
            case .forward: try backend.convolutionForward(g, input: x, weights: w, bias: b, output: out, epilogue: nil)
            case .backwardData: try backend.convolutionBackwardData(g, outputGradient: dy, weights: w, inputGradient: out)
            case .backwardWeights:
                try backend.convolutionBackwardWeights(g, input: x, outputGradient: dy, weightGradient: out, biasGradient: db)
            }
        }
        // The candidates that really run this shape, each checked against im2col before it is timed.
        var candidates: [CPUConvolutionAlgorithm] = [], rejected: [CPUConvolutionAlgorithm: String] = [:]
        var reference: [Float] = []
        for a in CPUConvolutionAlgorithm.allCases {
            guard backend.canRun(a, g, pass) else { continue }
            backend.convolutionAlgorithmOverride = a
            try call()
            let result = try backend.download(out)
            if a == .im2col { reference = result; candidates.append(a); continue }
            if let m = TunerMeasurement.mismatch(result, reference) {
                rejected[a] = "differs from im2col by \(m.difference) (largest output \(m.scale))"
            } else {
                candidates.append(a)
            }
        }
        let best = try TunerMeasurement.bestTimes(candidates, repeats: settings.repeats, threads: backend.threadCount,
                                                  select: { backend.convolutionAlgorithmOverride = $0 }, run: call)
        backend.convolutionAlgorithmOverride = nil
        // The built-in rule's algorithm keeps the shape unless another is more than 3% faster (timing noise).
        let fastest = best.min { $0.value < $1.value }
        let keepBuiltIn = fastest.map { f in best[builtIn].map { $0 <= 1.03 * f.value } ?? false } ?? true
        let choice = keepBuiltIn ? builtIn : fastest!.key
        return Outcome(problem: p, geometry: g, pass: pass, milliseconds: best, choice: choice, builtIn: builtIn, rejected: rejected)
    }
}

extension CPUConvolutionPass {
    /// The CPU convolution pass of a step's pass (`.forward`, `.backwardData` or `.backwardWeights`).
    public init(_ pass: PreparedPasses) {
        self = pass == .forward ? .forward : pass == .backwardData ? .backwardData : .backwardWeights
    }
}
