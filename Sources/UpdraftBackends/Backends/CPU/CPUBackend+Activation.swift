// Activations, clip and unary functions on the CPU, and the same functions as the convolution and
// inner-product epilogues. Every loop runs `ActivationKind.forward` / `.derivative` (the one table);
// the dispatch below only turns the run-time kind into a constant so each loop is compiled for one
// function. In-place calls (output == input) are fine: every element is read before it is written.
// The piecewise-linear kinds (ReLU, leaky ReLU / PReLU, linear, clip) run the C loops of
// CUpdraftKernels at the vector level chosen at start-up (CPUVectorLevel): the same expressions
// as the table's, element for element.
import CUpdraftKernels
import UpdraftCore

/// An activation ready to run over [N, C, S] memory: kind, scalars, per-channel constants, the
/// backward rule and the thread grain.
struct CPUActivationPlan {
    let kind: ActivationKind
    let scalars: ActivationScalars
    /// [a_0 … a_{C-1}, b_0 … b_{C-1}] for per-channel kinds.
    let channelConstants: [Float]?
    let channels: Int
    let spatial: Int
    let fromOutput: Bool

    init(_ a: Activation, channels: Int, spatial: Int) throws {
        try a.validate(channels: channels)
        kind = a.kind
        scalars = a.scalars
        channelConstants = try a.channelConstants(channels: channels)
        self.channels = max(channels, 1)
        self.spatial = max(spatial, 1)
        fromOutput = a.backwardReadsOutput
    }

    var grain: Int { kind.isTranscendental ? CPUParallel.transcendentalGrain : CPUParallel.elementGrain }

    /// Calls `body(lo, hi, scalars)` over `r` cut where the channel (and so the constants) changes.
    @inline(__always)
    private func segments(_ r: Range<Int>, _ body: (Int, Int, ActivationScalars) -> Void) {
        guard let table = channelConstants else { body(r.lowerBound, r.upperBound, scalars); return }
        var i = r.lowerBound
        while i < r.upperBound {
            let plane = i / spatial, c = plane % channels
            let end = min(r.upperBound, (plane + 1) * spatial)
            var p = scalars
            p.a = table[c]; p.b = table[channels + c]
            body(i, end, p)
            i = end
        }
    }

    /// y[i] = f(x[i]) for i in r.
    func forward(_ x: UnsafePointer<Float>, _ y: UnsafeMutablePointer<Float>, _ r: Range<Int>) {
        let k = kind
        segments(r) { lo, hi, p in Self.forwardDispatch(k, p, x, y, lo, hi) }
    }

    /// dx[i] = dy[i] * f'(v[i]) for i in r, v being y or x as `fromOutput` says.
    func backward(_ v: UnsafePointer<Float>, _ dy: UnsafePointer<Float>, _ dx: UnsafeMutablePointer<Float>, _ r: Range<Int>) {
        let k = kind, fromOutput = self.fromOutput
        segments(r) { lo, hi, p in Self.backwardDispatch(k, p, fromOutput, v, dy, dx, lo, hi) }
    }

    @inline(__always)
    private static func forwardLoop(_ k: ActivationKind, _ p: ActivationScalars, _ x: UnsafePointer<Float>,
                                    _ y: UnsafeMutablePointer<Float>, _ lo: Int, _ hi: Int) {
        for i in lo..<hi { y[i] = k.forward(x[i], p) }
    }

    @inline(__always)
    private static func backwardLoop(_ k: ActivationKind, _ p: ActivationScalars, _ fromOutput: Bool, _ v: UnsafePointer<Float>,
                                     _ dy: UnsafePointer<Float>, _ dx: UnsafeMutablePointer<Float>, _ lo: Int, _ hi: Int) {
        for i in lo..<hi { dx[i] = dy[i] * k.derivative(v[i], p, fromOutput: fromOutput) }
    }

    // Each case passes its kind as a literal, so the inlined loop is specialised for that function.
    private static func forwardDispatch(_ k: ActivationKind, _ p: ActivationScalars, _ x: UnsafePointer<Float>,
                                        _ y: UnsafeMutablePointer<Float>, _ lo: Int, _ hi: Int) {
        switch k {
        case .linear: upd_linear_forward(x + lo, y + lo, hi - lo, p.a, p.b)
        case .relu: upd_relu_forward(x + lo, y + lo, hi - lo)
        case .leakyReLU, .prelu: upd_leaky_forward(x + lo, y + lo, hi - lo, p.a)
        case .thresholdedReLU: forwardLoop(.thresholdedReLU, p, x, y, lo, hi)
        case .tanh: forwardLoop(.tanh, p, x, y, lo, hi)
        case .scaledTanh: forwardLoop(.scaledTanh, p, x, y, lo, hi)
        case .sigmoid: forwardLoop(.sigmoid, p, x, y, lo, hi)
        case .sigmoidHard: forwardLoop(.sigmoidHard, p, x, y, lo, hi)
        case .elu: forwardLoop(.elu, p, x, y, lo, hi)
        case .softsign: forwardLoop(.softsign, p, x, y, lo, hi)
        case .softplus: forwardLoop(.softplus, p, x, y, lo, hi)
        case .parametricSoftplus: forwardLoop(.parametricSoftplus, p, x, y, lo, hi)
        case .clip: upd_clip_forward(x + lo, y + lo, hi - lo, p.a, p.b)
        case .sqrt: forwardLoop(.sqrt, p, x, y, lo, hi)
        case .rsqrt: forwardLoop(.rsqrt, p, x, y, lo, hi)
        case .inverse: forwardLoop(.inverse, p, x, y, lo, hi)
        case .power: forwardLoop(.power, p, x, y, lo, hi)
        case .exp: forwardLoop(.exp, p, x, y, lo, hi)
        case .log: forwardLoop(.log, p, x, y, lo, hi)
        case .abs: forwardLoop(.abs, p, x, y, lo, hi)
        case .threshold: forwardLoop(.threshold, p, x, y, lo, hi)
        }
    }

    private static func backwardDispatch(_ k: ActivationKind, _ p: ActivationScalars, _ f: Bool, _ v: UnsafePointer<Float>,
                                         _ dy: UnsafePointer<Float>, _ dx: UnsafeMutablePointer<Float>, _ lo: Int, _ hi: Int) {
        switch k {
        case .linear: backwardLoop(.linear, p, f, v, dy, dx, lo, hi)
        case .relu: upd_relu_backward(v + lo, dy + lo, dx + lo, hi - lo)
        case .leakyReLU, .prelu: upd_leaky_backward(v + lo, dy + lo, dx + lo, hi - lo, p.a)
        case .thresholdedReLU: backwardLoop(.thresholdedReLU, p, f, v, dy, dx, lo, hi)
        case .tanh: backwardLoop(.tanh, p, f, v, dy, dx, lo, hi)
        case .scaledTanh: backwardLoop(.scaledTanh, p, f, v, dy, dx, lo, hi)
        case .sigmoid: backwardLoop(.sigmoid, p, f, v, dy, dx, lo, hi)
        case .sigmoidHard: backwardLoop(.sigmoidHard, p, f, v, dy, dx, lo, hi)
        case .elu: backwardLoop(.elu, p, f, v, dy, dx, lo, hi)
        case .softsign: backwardLoop(.softsign, p, f, v, dy, dx, lo, hi)
        case .softplus: backwardLoop(.softplus, p, f, v, dy, dx, lo, hi)
        case .parametricSoftplus: backwardLoop(.parametricSoftplus, p, f, v, dy, dx, lo, hi)
        case .clip: backwardLoop(.clip, p, f, v, dy, dx, lo, hi)
        case .sqrt: backwardLoop(.sqrt, p, f, v, dy, dx, lo, hi)
        case .rsqrt: backwardLoop(.rsqrt, p, f, v, dy, dx, lo, hi)
        case .inverse: backwardLoop(.inverse, p, f, v, dy, dx, lo, hi)
        case .power: backwardLoop(.power, p, f, v, dy, dx, lo, hi)
        case .exp: backwardLoop(.exp, p, f, v, dy, dx, lo, hi)
        case .log: backwardLoop(.log, p, f, v, dy, dx, lo, hi)
        case .abs: backwardLoop(.abs, p, f, v, dy, dx, lo, hi)
        case .threshold: backwardLoop(.threshold, p, f, v, dy, dx, lo, hi)
        }
    }
}

extension CPUBackend {
    /// One float32 pass of the activation table's forward function, split over threads; in place is allowed.
    public func activationForward(_ a: Activation, _ g: ActivationGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try requireSizes(["batch": g.batch, "channels": g.channels, "spatial size": g.spatial], op: "\(a)")
        let plan = try CPUActivationPlan(a, channels: g.channels, spatial: g.spatial)
        let x = try pointer(input, g.count, "\(a) input")
        let y = try pointer(output, g.count, "\(a) output")
        parallelChunks(g.count, grain: plan.grain) { r in plan.forward(x, y, r) }
    }

    /// Uses the input or the output (whichever the kind's derivative needs; the other is not read); in place is allowed.
    public func activationBackward(_ a: Activation, _ g: ActivationGeometry, input: DeviceBuffer, output: DeviceBuffer,
                                   outputGradient: DeviceBuffer, inputGradient: DeviceBuffer) throws {
        try requireSizes(["batch": g.batch, "channels": g.channels, "spatial size": g.spatial], op: "\(a) backward")
        let plan = try CPUActivationPlan(a, channels: g.channels, spatial: g.spatial)
        let v = plan.fromOutput ? try pointer(output, g.count, "\(a) output") : try pointer(input, g.count, "\(a) input")
        let dy = try pointer(outputGradient, g.count, "\(a) output gradient")
        let dx = try pointer(inputGradient, g.count, "\(a) input gradient")
        parallelChunks(g.count, grain: plan.grain) { r in plan.backward(v, dy, dx, r) }
    }

    /// The fused epilogue: y = f(y) in place over `channels` rows of `spatial` values.
    func applyEpilogue(_ plan: CPUActivationPlan, _ y: UnsafeMutablePointer<Float>, count: Int, parallel: Bool) {
        chunks(count, grain: plan.grain, parallel: parallel) { r in plan.forward(y, y, r) }
    }

    /// The fused residual epilogue of an engine that cannot add inside its own loops: y = f(y + residual)
    /// in place (no f when `plan` is nil), the add and the function chunk by chunk while the chunk is in cache.
    func applyResidualEpilogue(_ plan: CPUActivationPlan?, _ y: UnsafeMutablePointer<Float>, residual: UnsafePointer<Float>,
                               count: Int, parallel: Bool) {
        chunks(count, grain: plan?.grain ?? CPUParallel.elementGrain, parallel: parallel) { r in
            upd_add(y + r.lowerBound, residual + r.lowerBound, r.count)
            plan?.forward(y, y, r)
        }
    }
}
