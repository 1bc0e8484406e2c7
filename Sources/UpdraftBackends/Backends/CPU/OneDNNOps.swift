import CDNNL
import Foundation
import UpdraftCore

// oneDNN as a second engine for the CPU backend's pooling and inner product (the convolution's is in
// OneDNN.swift), chosen per shape and pass by `updraft tune --cpu` and stored in the same tuning file.

/// Which engine runs a CPU pooling or inner-product pass: Updraft's own loops and SGEMMs, or oneDNN.
public enum CPUOpEngine: String, Sendable, Codable, CaseIterable {
    case own
    case onednn
}

/// The passes of a pooling (forward, backward) and of an inner product (forward, backward-data,
/// backward-weights), as the stored tuning names them.
public enum CPUOpPass: String, Sendable, Codable, CaseIterable {
    case forward
    case backward
    case backwardData = "backward-data"
    case backwardWeights = "backward-weights"

    /// The passes `op` has.
    public static func passes(pooling: Bool) -> [CPUOpPass] {
        pooling ? [.forward, .backward] : [.forward, .backwardData, .backwardWeights]
    }
}

/// A pooling or inner-product shape the CPU op engines are chosen for.
public enum CPUOpShape: Hashable, Sendable {
    case pooling(PoolGeometry)
    case innerProduct(InnerProductGeometry)

    /// Everything the engines' speed depends on ("pool max n64 c64x113x113 o56x56 k3x3 s2x2 p0,0,0,0 x1",
    /// "ip n64 1000->10 b1"); never the same as a convolution's key.
    public var key: String {
        switch self {
        case let .pooling(g):
            return "pool \(g.kind == .max ? "max" : "average") n\(g.batch) c\(g.channels)x\(g.inHeight)x\(g.inWidth)"
                + " o\(g.outHeight)x\(g.outWidth) k\(g.kernelH)x\(g.kernelW) s\(g.strideH)x\(g.strideW)"
                + " p\(g.padTop),\(g.padBottom),\(g.padLeft),\(g.padRight) x\(g.excludePadding ? 1 : 0)"
        case let .innerProduct(g):
            return "ip n\(g.batch) \(g.inputChannels)->\(g.outputChannels) b\(g.hasBias ? 1 : 0)"
        }
    }

    /// The passes this shape has.
    public var passes: [CPUOpPass] {
        if case .pooling = self { return CPUOpPass.passes(pooling: true) }
        return CPUOpPass.passes(pooling: false)
    }
}

extension CPUConvolutionTuning {
    /// The stored engine for `shape`'s `pass`, if one was measured.
    public func engine(_ shape: CPUOpShape, _ pass: CPUOpPass) -> CPUOpEngine? {
        opEngines?[shape.key]?[pass.rawValue]
    }

    /// Records `engine` for `shape`'s `pass`.
    public mutating func set(_ engine: CPUOpEngine, for shape: CPUOpShape, _ pass: CPUOpPass) {
        opEngines = opEngines ?? [:]
        opEngines![shape.key, default: [:]][pass.rawValue] = engine
    }
}

/// One oneDNN pooling or inner-product primitive for one shape and pass, on Updraft's plain layouts;
/// destroyed with the object. Not for concurrent use: the CPU backend runs it under its workspace lock.
final class OneDNNOp {
    private let handle: OpaquePointer
    /// The implementation oneDNN chose ("jit:avx2", "x64:gemm:jit", ...).
    let implementation: String
    /// Floats of scratch `run` needs (max-pooling backward's argmax pass).
    let scratchCount: Int

    /// nil (with the reason in `why`) when oneDNN is unavailable, has no implementation for the shape,
    /// or would not compute what Updraft's own pass computes (see `poolShape`).
    init?(_ shape: CPUOpShape, _ pass: CPUOpPass, why: inout String) {
        var message = [CChar](repeating: 0, count: 256)
        var made: OpaquePointer?
        switch shape {
        case let .pooling(g):
            guard pass == .forward || pass == .backward else { why = "pooling has no \(pass.rawValue) pass"; return nil }
            guard var s = Self.poolShape(g, why: &why) else { return nil }
            made = updraft_dnnl_pool_create(&s, pass == .backward ? 1 : 0, &message, message.count)
        case let .innerProduct(g):
            let shimPass: Int32
            switch pass {
            case .forward: shimPass = Int32(UPDRAFT_DNNL_FORWARD)
            case .backwardData: shimPass = Int32(UPDRAFT_DNNL_BACKWARD_DATA)
            case .backwardWeights: shimPass = Int32(UPDRAFT_DNNL_BACKWARD_WEIGHTS)
            case .backward: why = "an inner product has no \(pass.rawValue) pass"; return nil
            }
            var s = updraft_dnnl_ip_shape(batch: g.batch, in_channels: g.inputChannels, out_channels: g.outputChannels,
                                          has_bias: g.hasBias ? 1 : 0)
            made = updraft_dnnl_ip_create(&s, shimPass, &message, message.count)
        }
        guard let made else {
            why = String(cString: message)
            return nil
        }
        handle = made
        implementation = String(cString: updraft_dnnl_op_implementation(made))
        scratchCount = (updraft_dnnl_op_scratch_bytes(made) + 3) / 4
    }

    /// oneDNN's description of `g`, or nil where it would differ from Updraft's definition: a window
    /// wholly in padding (Updraft: 0), or an average over padding whose last window hangs past the
    /// padded extent (Updraft clips the divisor there, oneDNN does not).
    static func poolShape(_ g: PoolGeometry, why: inout String) -> updraft_dnnl_pool_shape? {
        // oneDNN wants the right/bottom padding to reach the last window (ceil mode reaches further than padBottom).
        let padBottom = max(g.padBottom, (g.outHeight - 1) * g.strideH + g.kernelH - g.inHeight - g.padTop)
        let padRight = max(g.padRight, (g.outWidth - 1) * g.strideW + g.kernelW - g.inWidth - g.padLeft)
        guard g.padTop < g.kernelH, padBottom < g.kernelH, g.padLeft < g.kernelW, padRight < g.kernelW else {
            why = "a window lies wholly in padding"
            return nil
        }
        if g.kind == .average, !g.excludePadding, padBottom != g.padBottom || padRight != g.padRight {
            why = "an average over padding whose last window hangs past the padded input"
            return nil
        }
        return updraft_dnnl_pool_shape(
            batch: g.batch, channels: g.channels, in_height: g.inHeight, in_width: g.inWidth,
            out_height: g.outHeight, out_width: g.outWidth, kernel_h: g.kernelH, kernel_w: g.kernelW,
            stride_h: g.strideH, stride_w: g.strideW, pad_top: g.padTop, pad_left: g.padLeft,
            pad_bottom: padBottom, pad_right: padRight, max: g.kind == .max ? 1 : 0, exclude_padding: g.excludePadding ? 1 : 0)
    }

    deinit { updraft_dnnl_op_destroy(handle) }

    /// Runs the pass on `threads` threads (operands as `updraft_dnnl_op_execute` names them).
    func run(threads: Int, _ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>? = nil, bias: UnsafePointer<Float>? = nil,
             out: UnsafeMutablePointer<Float>, outBias: UnsafeMutablePointer<Float>? = nil, scratch: CPUWorkspace) throws {
        let space = scratch.floats(scratchCount)
        try oneDNNExecute(implementation, hint: "set UPDRAFT_ONEDNN=off to run Updraft's own pooling and inner products") {
            updraft_dnnl_op_execute(handle, Int32(clamping: threads), a, b, bias, out, outBias, space, $0, $1)
        }
    }
}

/// What a pooling or inner-product primitive is made for.
struct OneDNNOpKey: Hashable {
    var shape: CPUOpShape
    var pass: CPUOpPass
}
