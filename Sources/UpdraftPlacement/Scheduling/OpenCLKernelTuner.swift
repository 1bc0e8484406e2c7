import Foundation
import UpdraftCore
import UpdraftBackends
import UpdraftModel
import UpdraftLayers

/// One GEMM-shaped op the tuner times: a layer's convolution in one direction, or a plain GEMM
/// (inner products), at the batch size training uses. Built from a step's `TunedPass`; a plain GEMM
/// of any transposes (which no layer pass names) can be timed too.
public struct KernelTuningProblem: CustomStringConvertible {
    /// What is timed: a plain GEMM (inner products), or a convolution in one direction (`KernelShape.Kind`), optionally with a fused ReLU.
    public enum Op {
        /// A plain GEMM with the given dimensions and transposes (an inner product).
        case gemm(GemmOperation)
        /// A convolution of this geometry in one direction (forward, backward data or backward weights), with or without a fused ReLU.
        case convolution(ConvGeometry, KernelShape.Kind, fusedReLU: Bool)
    }

    /// Label for reports: the layer name and direction, e.g. "conv1 weight gradient".
    public var name: String
    /// The GEMM or convolution to time.
    public var op: Op

    /// A problem named `name` for `op`.
    public init(name: String, op: Op) { self.name = name; self.op = op }

    /// The op's shape class, the key under which the tuned variant is stored (`classKey`).
    public var shape: KernelShape {
        switch op {
        case let .gemm(g): return KernelShape(g)
        case let .convolution(g, kind, relu): return KernelShape(g, kind, fusedReLU: relu)
        }
    }

    /// Floating-point operations of one run of the op (2 per multiply-add), for GFLOP/s in reports.
    public var flops: Double {
        switch op {
        case let .gemm(g): return g.cost.flops
        case let .convolution(g, kind, _):
            switch kind {
            case .convForward, .gemm: return g.forwardCost.flops
            case .convBackwardData: return g.backwardDataCost.flops
            case .convBackwardWeights: return g.backwardWeightsCost.flops
            }
        }
    }

    /// "name (shape)".
    public var description: String { "\(name) (\(shape))" }

    /// The GEMMs and convolutions that training `graph` at `batch` runs (`TunedPass.forTraining`,
    /// forward at the step's batch: an OpenCL step does not chunk its prefix): one problem per shape
    /// class (the first met).
    public static func forTraining(_ graph: NetworkGraph, batch: Int) throws -> [KernelTuningProblem] {
        var out: [KernelTuningProblem] = [], seen = Set<String>()
        for pass in try TunedPass.forTraining(graph, batch: batch, chunked: false) {
            if let p = try KernelTuningProblem(pass), seen.insert(p.shape.classKey).inserted { out.append(p) }
        }
        return out
    }

    /// The problem a convolution or inner-product pass is on the device (an inner product's passes
    /// are plain GEMMs); nil for another op.
    public init?(_ p: TunedPass) throws {
        let what = p.pass == .forward ? "forward" : p.pass == .backwardData ? "input gradient" : "weight gradient"
        let name = "\(p.layer) \(what)"
        if let g = try p.convolutionGeometry() {
            let kind: KernelShape.Kind = p.pass == .forward ? .convForward : p.pass == .backwardData ? .convBackwardData : .convBackwardWeights
            self.init(name: name, op: .convolution(g, kind, fusedReLU: false))
        } else if let g = try p.innerProductGeometry() {
            let gemm: GemmOperation
            switch p.pass {
            case .forward:
                var forward = GemmOperation(m: g.batch, n: g.outputChannels, k: g.inputChannels, transB: true)
                forward.bias = g.hasBias ? .perColumn : .none
                gemm = forward
            case .backwardWeights: gemm = GemmOperation(m: g.outputChannels, n: g.inputChannels, k: g.batch, transA: true)
            default: gemm = GemmOperation(m: g.batch, n: g.inputChannels, k: g.outputChannels)
            }
            self.init(name: name, op: .gemm(gemm))
        } else {
            return nil
        }
    }

    // MARK: Running

    /// Buffers for the op, filled with small values (timings do not depend on them).
    func makeBuffers(_ cl: OpenCLBackend) throws -> [DeviceBuffer] {
        func filled(_ n: Int, _ v: Float) throws -> DeviceBuffer {
            let b = try cl.makeBuffer(count: max(1, n)); try cl.fill(b, with: v); return b
        }
        switch op {
        case let .gemm(g):
            let e = g.extents
            return [try filled(e.a, 0.5), try filled(e.b, 0.01), try filled(e.c, 0), try filled(max(g.m, g.n), 0.1)]
        case let .convolution(g, _, _):
            return [try filled(g.inputShape.count, 0.5), try filled(g.weightShape.count, 0.01),
                    try filled(g.outChannels, 0.1), try filled(g.outputShape.count, 0.25)]
        }
    }

    /// Enqueues the op once on `cl` with `buffers` from `makeBuffers` (of any backend on the same context).
    func run(_ cl: Backend, _ b: [DeviceBuffer]) throws {
        switch op {
        case let .gemm(g):
            guard let ocl = cl as? OpenCLBackend else {
                throw UpdraftError(.invalidArgument, "plain GEMMs are tuned on OpenCL backends only")
            }
            try ocl.sgemm(g, a: b[0], b: b[1], c: b[2], bias: g.bias == .none ? nil : b[3])
        case let .convolution(g, kind, relu):
            let bias = g.hasBias ? b[2] : nil
            switch kind {
            case .convForward, .gemm:
                try cl.convolutionForward(g, input: b[0], weights: b[1], bias: bias, output: b[3], fusedReLU: relu)
            case .convBackwardData:
                try cl.convolutionBackwardData(g, outputGradient: b[3], weights: b[1], inputGradient: b[0])
            case .convBackwardWeights:
                try cl.convolutionBackwardWeights(g, input: b[0], outputGradient: b[3], weightGradient: b[1], biasGradient: bias)
            }
        }
    }

    /// A small problem of the same kind (transposes, epilogue, pointwise-ness, groups) with awkward
    /// sizes, on which every candidate is checked against the reference before it is timed.
    func checkProblem() throws -> KernelTuningProblem {
        switch op {
        case let .gemm(g):
            var s = GemmOperation(m: 37, n: 29, k: 45, transA: g.transA, transB: g.transB, batch: g.batch > 1 ? 2 : 1)
            s.bias = g.bias; s.activation = g.activation; s.activationPerRow = g.activationPerRow
            return KernelTuningProblem(name: "check", op: .gemm(s))
        case let .convolution(g, kind, relu):
            let groups = g.groups > 1 ? 2 : 1
            let pointwise = KernelShape(g, kind).pointwise
            let spec = pointwise
                ? ConvolutionSpec(inputChannels: 18, outputChannels: 22, kernelH: 1, kernelW: 1, groups: groups, hasBias: g.hasBias)
                : ConvolutionSpec(inputChannels: 6, outputChannels: 10, kernelH: 3, kernelW: 3, strideH: g.strideH, strideW: g.strideW,
                                  groups: groups, padding: .valid(top: 1, bottom: 1, left: 1, right: 1), hasBias: g.hasBias)
            let small = try spec.geometry(input: [2, spec.inputChannels, 7, 5])
            return KernelTuningProblem(name: "check", op: .convolution(small, kind, fusedReLU: relu))
        }
    }

    /// The op's result on `cl` with seeded inputs, as Doubles (the reference run is the definition).
    func result(on cl: Backend) throws -> [Double] {
        var rng = SplitMix64(seed: 7)
        func values(_ n: Int) -> [Float] { (0..<max(1, n)).map { _ in rng.nextFloat(in: -1...1) } }
        switch op {
        case let .gemm(g):
            let e = g.extents
            let (a, b, bias) = (values(e.a), values(e.b), values(max(g.m, g.n)))
            if let ocl = cl as? OpenCLBackend {
                let c = try ocl.makeBuffer([Float](repeating: 7.25, count: max(1, e.c)))
                try ocl.sgemm(g, a: try ocl.makeBuffer(a), b: try ocl.makeBuffer(b), c: c,
                              bias: g.bias == .none ? nil : try ocl.makeBuffer(bias))
                return try ocl.download(c).map(Double.init)
            }
            return Self.referenceGemm(g, a, b, bias)
        case let .convolution(g, kind, relu):
            let x = values(g.inputShape.count), w = values(g.weightShape.count), bias = values(g.outChannels)
            let dy = values(g.outputShape.count)
            let out: DeviceBuffer
            switch kind {
            case .convForward, .gemm:
                out = try cl.makeBuffer([Float](repeating: 7.25, count: g.outputShape.count))
                try cl.convolutionForward(g, input: try cl.makeBuffer(x), weights: try cl.makeBuffer(w),
                                          bias: g.hasBias ? try cl.makeBuffer(bias) : nil, output: out, fusedReLU: relu)
            case .convBackwardData:
                out = try cl.makeBuffer([Float](repeating: 7.25, count: g.inputShape.count))
                try cl.convolutionBackwardData(g, outputGradient: try cl.makeBuffer(dy), weights: try cl.makeBuffer(w),
                                               inputGradient: out)
            case .convBackwardWeights:
                out = try cl.makeBuffer([Float](repeating: 7.25, count: g.weightShape.count))
                let db = g.hasBias ? try cl.makeBuffer(count: g.outChannels) : nil
                try cl.convolutionBackwardWeights(g, input: try cl.makeBuffer(x), outputGradient: try cl.makeBuffer(dy),
                                                  weightGradient: out, biasGradient: db)
            }
            return try cl.download(out).map(Double.init)
        }
    }

    /// C as `GemmOperation` defines it, in Double, C starting at zero (beta is 0 in every check).
    static func referenceGemm(_ g: GemmOperation, _ a: [Float], _ b: [Float], _ bias: [Float]) -> [Double] {
        var c = [Double](repeating: 7.25, count: max(1, g.extents.c))
        for z in 0..<g.batch {
            for i in 0..<g.m {
                for j in 0..<g.n {
                    var s = 0.0
                    for p in 0..<g.k {
                        let av = g.transA ? a[g.offsetA + z * g.strideA + p * g.lda + i] : a[g.offsetA + z * g.strideA + i * g.lda + p]
                        let bv = g.transB ? b[g.offsetB + z * g.strideB + j * g.ldb + p] : b[g.offsetB + z * g.strideB + p * g.ldb + j]
                        s += Double(av) * Double(bv)
                    }
                    s *= Double(g.alpha)
                    if g.bias == .perRow { s += Double(bias[i]) } else if g.bias == .perColumn { s += Double(bias[j]) }
                    if let a = g.activation {
                        s = Double(a.kind.forward(Float(s), a.scalars))
                    }
                    c[g.offsetC + z * g.strideC + i * g.ldc + j] = s
                }
            }
        }
        return c
    }
}
