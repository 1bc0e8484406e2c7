import UpdraftCore
import UpdraftBackends
import UpdraftModel
import UpdraftLayers

/// One pass a training step runs, as the tuners time it: the layer's name, its op as the verification
/// catalogue describes it (`ConvolutionCase`, `InnerProductCase` or `PoolingCase`, at the batch the
/// pass runs at) and which pass. The CPU convolution tuner, the CPU op tuner and the OpenCL kernel
/// tuner all take their work from `forTraining`, one walk over the step's `PassPlan`.
public struct TunedPass: Sendable, CustomStringConvertible {
    /// The layer the pass belongs to (a label for reports).
    public var layer: String
    /// The op and its sizes, batch included.
    public var op: OpCase
    /// One of `.forward`, `.backwardData` and `.backwardWeights`.
    public var pass: PreparedPasses

    /// The pass `pass` of `op`, labelled with `layer`.
    public init(layer: String, op: OpCase, pass: PreparedPasses) {
        self.layer = layer; self.op = op; self.pass = pass
    }

    /// A convolution's pass.
    public static func convolution(_ layer: String, _ spec: ConvolutionSpec, input: Shape, _ pass: PreparedPasses) -> TunedPass {
        TunedPass(layer: layer, op: OpCase(.convolution(spec, input: input, epilogue: nil)), pass: pass)
    }
    /// An inner product's pass.
    public static func innerProduct(_ layer: String, _ spec: InnerProductSpec, input: Shape, _ pass: PreparedPasses) -> TunedPass {
        TunedPass(layer: layer, op: OpCase(.innerProduct(spec, input: input, epilogue: nil)), pass: pass)
    }
    /// A pooling pass (`.backwardData` is its backward).
    public static func pooling(_ layer: String, _ spec: PoolingSpec, input: Shape, _ pass: PreparedPasses) -> TunedPass {
        TunedPass(layer: layer, op: OpCase(.pooling(spec, input: input)), pass: pass)
    }

    /// The convolution's geometry, or nil for another op.
    public func convolutionGeometry() throws -> ConvGeometry? {
        guard let c = op.subject(as: ConvolutionCase.self) else { return nil }
        return try c.spec.geometry(input: c.input)
    }
    /// The inner product's geometry, or nil for another op.
    public func innerProductGeometry() throws -> InnerProductGeometry? {
        guard let c = op.subject(as: InnerProductCase.self) else { return nil }
        return try c.spec.geometry(input: c.input)
    }
    /// The pooling's geometry, or nil for another op.
    public func poolingGeometry() throws -> PoolGeometry? {
        guard let c = op.subject(as: PoolingCase.self) else { return nil }
        return try c.spec.geometry(input: c.input)
    }

    /// "forward", "backward-data" or "backward-weights".
    public var passName: String {
        pass == .forward ? "forward" : pass == .backwardData ? "backward-data" : "backward-weights"
    }

    /// "layer pass (op case)".
    public var description: String { "\(layer) \(passName) (\(op))" }

    /// `forTraining`'s passes that `key` names (nil: not one this tuner times), the first of each key.
    public static func forTraining(_ graph: NetworkGraph, batch: Int, cacheBytes: Int = PrefixChunking.cacheBudgetBytes,
                                   distinctBy key: (TunedPass) throws -> String?) throws -> [TunedPass] {
        var seen = Set<String>()
        return try forTraining(graph, batch: batch, cacheBytes: cacheBytes).filter { p in
            guard let k = try key(p) else { return false }
            return seen.insert(k).inserted
        }
    }

    /// The convolution, inner-product and pooling passes that training `graph` at `batch` runs
    /// (`PassPlan.forTuning`, its prefix chunked with a cache budget of `cacheBytes`): forward at each
    /// batch the forward pass runs at, then the weight gradient, then the input gradient, in step
    /// order; a pass of an op already listed (same sizes) is listed once, under the first layer.
    /// `chunked: false` lists the forward passes at `batch` only (a device that does not chunk the prefix).
    public static func forTraining(_ graph: NetworkGraph, batch: Int, cacheBytes: Int = PrefixChunking.cacheBudgetBytes,
                                   chunked: Bool = true) throws -> [TunedPass] {
        var out: [TunedPass] = [], seen = Set<String>()
        for entry in PassPlan.forTuning(graph, batch: batch, cacheBytes: cacheBytes).entries {
            let layer = entry.layer
            func add(_ pass: PreparedPasses, batch n: Int) throws {
                guard entry.passes.contains(pass) else { return }
                let input = layer.inputShape.withBatch(n)
                let tuned: TunedPass
                switch layer.op {
                case let .convolution(spec): tuned = .convolution(layer.name, spec, input: input, pass)
                case let .innerProduct(spec):
                    _ = try spec.geometry(input: input)  // an input that does not fit is named here
                    tuned = .innerProduct(layer.name, spec, input: input, pass)
                case let .pooling(spec): tuned = .pooling(layer.name, spec, input: input, pass)
                default: return
                }
                if seen.insert("\(tuned.op.subject.summary) \(tuned.passName)").inserted { out.append(tuned) }
            }
            for n in chunked ? entry.forwardBatches : [batch] { try add(.forward, batch: n) }
            try add(.backwardWeights, batch: batch)
            try add(.backwardData, batch: batch)
        }
        return out
    }
}
