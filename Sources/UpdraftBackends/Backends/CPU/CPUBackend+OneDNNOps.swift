import Foundation
import UpdraftCore

// oneDNN as a second implementation of the CPU pooling and inner-product passes. Which engine runs a
// shape's pass is decided by (first that applies): `opEngineOverride` (tests, gradcheck,
// UPDRAFT_ONEDNN=on), then the stored tuning (`updraft tune --cpu`, the same file and key as the
// convolutions'), else Updraft's own. oneDNN chosen where the library is missing, or for a shape it
// cannot run as Updraft defines it, runs the own path (with one warning for a missing library).

extension CPUBackend {
    /// The engine `shape`'s `pass` runs with as things are set now.
    public func engine(for shape: CPUOpShape, _ pass: CPUOpPass) -> CPUOpEngine {
        oneDNNOp(shape, pass) == nil ? .own : .onednn
    }

    /// What runs a pooling or inner-product pass here, as a profile names it: oneDNN's implementation
    /// ("oneDNN jit:avx512_core") where the override or the stored tuning chose it, else Updraft's own
    /// loops (pooling) or OpenBLAS (inner product); for an inner product's backward the weight gradient's
    /// and, with `inputGradient`, the input gradient's.
    public func opEngineName(_ shape: CPUOpShape, backward: Bool, inputGradient: Bool) -> String {
        func name(_ pass: CPUOpPass) -> String {
            if engine(for: shape, pass) == .onednn, let implementation = oneDNNImplementation(shape, pass) { return "oneDNN \(implementation)" }
            if case .innerProduct = shape { return "OpenBLAS SGEMM" }
            return "Updraft loops (\(CPUVectorLevel.active))"
        }
        switch shape {
        case .pooling: return name(backward ? .backward : .forward)
        case .innerProduct:
            guard backward else { return name(.forward) }
            return "weights " + name(.backwardWeights) + (inputGradient ? ", input " + name(.backwardData) : "")
        }
    }

    /// The implementation oneDNN runs `shape`'s `pass` with when forced ("jit:avx2"); nil where it would not run.
    public func oneDNNImplementation(_ shape: CPUOpShape, _ pass: CPUOpPass) -> String? {
        guard OneDNN.isAvailable else { return nil }
        return oneDNNOpPrimitives.primitive(OneDNNOpKey(shape: shape, pass: pass))?.implementation
    }

    /// oneDNN's primitive when the override or the stored tuning asks for it and it can run the shape.
    private func oneDNNOp(_ shape: CPUOpShape, _ pass: CPUOpPass) -> OneDNNOp? {
        asksOneDNN(shape, pass) ? oneDNNOpPrimitives.primitive(OneDNNOpKey(shape: shape, pass: pass)) : nil
    }

    /// True when the override or the stored tuning asks oneDNN for `shape`'s `pass` and the library
    /// loads (one warning per process where it does not).
    func asksOneDNN(_ shape: CPUOpShape, _ pass: CPUOpPass) -> Bool {
        guard (opEngineOverride ?? convolutionTuning?.engine(shape, pass)) == .onednn else { return false }
        guard OneDNN.isAvailable else { OneDNN.warnUnavailable(); return false }
        return true
    }

    /// Pooling forward through oneDNN when chosen; false to run the own path.
    func oneDNNPoolingForward(_ g: PoolGeometry, x: UnsafePointer<Float>, y: UnsafeMutablePointer<Float>) throws -> Bool {
        guard g.batch > 0, let p = oneDNNOp(.pooling(g), .forward) else { return false }
        try withWorkspaces { ws in try p.run(threads: threadCount, x, out: y, scratch: ws[0]) }
        return true
    }

    /// Pooling backward (dx overwritten) through oneDNN when chosen; false to run the own path.
    func oneDNNPoolingBackward(_ g: PoolGeometry, x: UnsafePointer<Float>, dy: UnsafePointer<Float>,
                               dx: UnsafeMutablePointer<Float>) throws -> Bool {
        guard g.batch > 0, let p = oneDNNOp(.pooling(g), .backward) else { return false }
        try withWorkspaces { ws in try p.run(threads: threadCount, x, dy, out: dx, scratch: ws[0]) }
        return true
    }

    /// Inner-product forward (bias added, `plan` applied after) through oneDNN when chosen; false to run the own path.
    func oneDNNInnerProductForward(_ g: InnerProductGeometry, x: UnsafePointer<Float>, w: UnsafePointer<Float>,
                                   bias: UnsafePointer<Float>?, y: UnsafeMutablePointer<Float>,
                                   plan: CPUActivationPlan?) throws -> Bool {
        guard let p = oneDNNOp(.innerProduct(g), .forward) else { return false }
        try withWorkspaces { ws in try p.run(threads: threadCount, x, w, bias: bias, out: y, scratch: ws[0]) }
        if let plan { applyEpilogue(plan, y, count: g.batch * g.outputChannels, parallel: true) }
        return true
    }

    /// dx = dy x w through oneDNN when chosen; false to run the own path.
    func oneDNNInnerProductBackwardData(_ g: InnerProductGeometry, dy: UnsafePointer<Float>, w: UnsafePointer<Float>,
                                       dx: UnsafeMutablePointer<Float>) throws -> Bool {
        guard let p = oneDNNOp(.innerProduct(g), .backwardData) else { return false }
        try withWorkspaces { ws in try p.run(threads: threadCount, dy, w, out: dx, scratch: ws[0]) }
        return true
    }

    /// dw (and db), overwritten, through oneDNN when chosen; false to run the own path.
    func oneDNNInnerProductBackwardWeights(_ g: InnerProductGeometry, x: UnsafePointer<Float>, dy: UnsafePointer<Float>,
                                          dw: UnsafeMutablePointer<Float>, db: UnsafeMutablePointer<Float>?) throws -> Bool {
        guard let p = oneDNNOp(.innerProduct(g), .backwardWeights) else { return false }
        try withWorkspaces { ws in try p.run(threads: threadCount, x, dy, out: dw, outBias: db, scratch: ws[0]) }
        return true
    }
}
