import Foundation
import UpdraftCore

// oneDNN as a second implementation of the CPU convolution passes, next to im2col + OpenBLAS and
// Winograd. Which one runs a layer is decided, per shape and pass, by (first that applies):
//   1. `convolutionAlgorithmOverride` (tests, benchmarks, UPDRAFT_WINOGRAD / UPDRAFT_ONEDNN=on);
//   2. the stored tuning (`convolutionTuning`, measured by `updraft tune --cpu` on this CPU model,
//      oneDNN version and thread count);
//   3. the built-in rule (im2col, or Winograd for wide 3x3 layers), which never picks oneDNN.
// oneDNN chosen where the library is missing, or for a shape it has no implementation for, runs the
// own path (with one warning for a missing library). Operands stay in Updraft's NCHW layout; with
// `oneDNNBlockedLayouts` oneDNN reorders them into its blocked layouts around each call, in the first
// worker's workspace (shared by every primitive, as they run one at a time under the workspace lock).

extension CPUBackend {
    /// The algorithm the override or the stored tuning asks for `g`'s `pass`, when it can run it.
    func requestedAlgorithm(_ g: ConvGeometry, _ pass: CPUConvolutionPass) -> CPUConvolutionAlgorithm? {
        guard let wanted = convolutionAlgorithmOverride ?? convolutionTuning?.choice(g, pass) else { return nil }
        switch wanted {
        case .onednn:
            guard OneDNN.isAvailable else { OneDNN.warnUnavailable(); return nil }
            return g.batch > 0 ? .onednn : nil
        case .im2col:
            return .im2col
        case .direct:
            return pass == .forward && directApplies(g) ? .direct : nil
        case .winograd, .winograd4x4:
            switch pass {
            case .forward: return winogradApplies(g) ? wanted : nil
            case .backwardData: return winogradBackwardDataGeometry(g) != nil ? wanted : nil
            case .backwardWeights: return nil
            }
        }
    }

    /// The algorithm `g`'s `pass` runs with as things are set now.
    public func algorithm(for g: ConvGeometry, _ pass: CPUConvolutionPass) -> CPUConvolutionAlgorithm {
        switch pass {
        case .forward: return forwardAlgorithm(for: g)
        case .backwardData: return backwardDataAlgorithm(for: g)
        case .backwardWeights: return backwardWeightsAlgorithm(for: g)
        }
    }

    /// True when `a` really runs `g`'s `pass` if forced (it applies to the shape; for oneDNN, the
    /// library loads and has a primitive for it). Leaves the override as it was.
    public func canRun(_ a: CPUConvolutionAlgorithm, _ g: ConvGeometry, _ pass: CPUConvolutionPass) -> Bool {
        let saved = convolutionAlgorithmOverride
        defer { convolutionAlgorithmOverride = saved }
        convolutionAlgorithmOverride = a
        return algorithm(for: g, pass) == a && (a != .onednn || oneDNNImplementation(g, pass) != nil)
    }

    /// The weight-gradient algorithm for `g`: oneDNN where asked for and available, else im2col.
    public func backwardWeightsAlgorithm(for g: ConvGeometry) -> CPUConvolutionAlgorithm {
        requestedAlgorithm(g, .backwardWeights) == .onednn ? .onednn : .im2col
    }

    /// oneDNN's primitive for one pass, or nil when it has none for the shape (the caller then runs its own).
    /// Made for this backend's thread count (`OneDNNCache`).
    private func oneDNNPrimitive(_ g: ConvGeometry, _ pass: CPUConvolutionPass, relu: Bool = false,
                                 outputImageStride: Int? = nil) -> OneDNNConvolution? {
        oneDNNPrimitives.primitive(oneDNNKey(g, pass, relu: relu, outputImageStride: outputImageStride))
    }

    /// The cache key of `g`'s `pass` as this backend runs it (a ReLU fused or not, image n's output
    /// `outputImageStride` floats after image n - 1's; by default the whole output's stride).
    func oneDNNKey(_ g: ConvGeometry, _ pass: CPUConvolutionPass, relu: Bool = false,
                   outputImageStride: Int? = nil) -> OneDNNConvolutionKey {
        .init(geometry: g, pass: pass, relu: relu, outputImageStride: outputImageStride ?? g.outChannels * g.outHeight * g.outWidth,
              blocked: oneDNNBlockedLayouts)
    }

    /// The implementation oneDNN runs `g`'s `pass` with ("jit:avx2"), nil where it would not run.
    public func oneDNNImplementation(_ g: ConvGeometry, _ pass: CPUConvolutionPass) -> String? {
        oneDNNPrimitive(g, pass)?.implementation
    }

    /// The forward pass through oneDNN into `y` (image n's output at `y + n * imageStride`), with the
    /// bias and a ReLU epilogue fused and other epilogues applied after. False when oneDNN has no
    /// primitive for the shape.
    func oneDNNForward(_ g: ConvGeometry, x: UnsafePointer<Float>, w: UnsafePointer<Float>, bias: UnsafePointer<Float>?,
                       y: UnsafeMutablePointer<Float>, imageStride: Int, epilogue: Activation?,
                       plan: CPUActivationPlan?) throws -> Bool {
        let relu = epilogue == .relu
        guard let p = oneDNNPrimitive(g, .forward, relu: relu, outputImageStride: imageStride) else { return false }
        try withWorkspaces { ws in try p.run(threads: threadCount, x, w, bias: bias, out: y, scratch: ws[0]) }
        if let plan, !relu {
            let S = g.outHeight * g.outWidth
            for n in 0..<g.batch { applyEpilogue(plan, y + n * imageStride, count: g.outChannels * S, parallel: true) }
        }
        return true
    }

    /// dx through oneDNN; false when it has no primitive for the shape.
    func oneDNNBackwardData(_ g: ConvGeometry, dy: UnsafePointer<Float>, w: UnsafePointer<Float>,
                            dx: UnsafeMutablePointer<Float>) throws -> Bool {
        guard let p = oneDNNPrimitive(g, .backwardData) else { return false }
        try withWorkspaces { ws in try p.run(threads: threadCount, dy, w, out: dx, scratch: ws[0]) }
        return true
    }

    /// dw (and db) through oneDNN, overwritten; false when it has no primitive for the shape.
    func oneDNNBackwardWeights(_ g: ConvGeometry, x: UnsafePointer<Float>, dy: UnsafePointer<Float>,
                               dw: UnsafeMutablePointer<Float>, db: UnsafeMutablePointer<Float>?) throws -> Bool {
        guard let p = oneDNNPrimitive(g, .backwardWeights) else { return false }
        try withWorkspaces { ws in try p.run(threads: threadCount, x, dy, out: dw, outBias: db, scratch: ws[0]) }
        return true
    }
}
