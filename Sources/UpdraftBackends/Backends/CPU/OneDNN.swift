import CDNNL
import Foundation
import Synchronization
import UpdraftCore

/// oneDNN (libdnnl.so.2), the second CPU convolution engine, as the CDNNL shim loads it at run time.
/// A host without the library (or a build without its header) has `unavailableReason` set and runs
/// Updraft's own convolutions; the first convolution that would have used oneDNN prints one warning.
public enum OneDNN {
    /// nil when oneDNN is loaded and usable; otherwise why not (loaded once per process). Its code is
    /// capped at the CPU backend's vector level first (`UPDRAFT_CPU_LEVEL=baseline` gives SSE4.1,
    /// `avx2` AVX2), so a forced level holds for both engines.
    public static let unavailableReason: String? = {
        updraft_dnnl_limit_level(Int32(CPUVectorLevel.active.rawValue))
        var why = [CChar](repeating: 0, count: 256)
        return updraft_dnnl_load(&why, why.count) == 1 ? nil : String(cString: why)
    }()

    /// True when oneDNN is loaded and usable.
    public static var isAvailable: Bool { unavailableReason == nil }

    /// "2.6.3 (OpenMP)", or nil when oneDNN is unavailable.
    public static var version: String? { isAvailable ? String(cString: updraft_dnnl_version()) : nil }

    /// The instruction set oneDNN generates code for ("avx512_core", "avx2", "sse41"), or nil when it is unavailable.
    public static var isa: String? { isAvailable ? String(cString: updraft_dnnl_isa()) : nil }

    private static let warned = Atomic<Bool>(false)

    /// Prints, once per process, that a convolution, pooling or inner product chosen for oneDNN runs on the own path.
    static func warnUnavailable() {
        guard let reason = unavailableReason, !warned.exchange(true, ordering: .relaxed) else { return }
        FileHandle.standardError.write(Data(
            "warning: oneDNN is unavailable (\(reason)); the CPU convolutions, pooling and inner products chosen for it run on Updraft's own path. Install libdnnl2 (Debian: apt-get install libdnnl2) to use it.\n".utf8))
    }
}

/// The three passes of a convolution, as oneDNN's primitives and the stored CPU tuning name them.
public enum CPUConvolutionPass: String, Sendable, Codable, CaseIterable {
    case forward
    case backwardData = "backward-data"
    case backwardWeights = "backward-weights"

    var shimPass: Int32 {
        switch self {
        case .forward: return Int32(UPDRAFT_DNNL_FORWARD)
        case .backwardData: return Int32(UPDRAFT_DNNL_BACKWARD_DATA)
        case .backwardWeights: return Int32(UPDRAFT_DNNL_BACKWARD_WEIGHTS)
        }
    }
}

/// One oneDNN convolution primitive (with its reorders and memory objects) for one geometry and pass;
/// destroyed with the object. Not for concurrent use: the CPU backend runs it under its workspace lock.
final class OneDNNConvolution {
    private let handle: OpaquePointer
    /// The implementation oneDNN chose ("jit:avx2", "gemm:jit", ...).
    let implementation: String
    /// Floats of scratch `run` needs for the operands in oneDNN's own layouts.
    let scratchCount: Int

    /// nil (with the reason in `why`) when oneDNN is unavailable or has no implementation for the shape.
    init?(_ g: ConvGeometry, pass: CPUConvolutionPass, relu: Bool, outputImageStride: Int, blocked: Bool, why: inout String) {
        var shape = updraft_dnnl_conv_shape(
            batch: g.batch, in_channels: g.inChannels, in_height: g.inHeight, in_width: g.inWidth,
            out_channels: g.outChannels, out_height: g.outHeight, out_width: g.outWidth,
            kernel_h: g.kernelH, kernel_w: g.kernelW, stride_h: g.strideH, stride_w: g.strideW,
            dilation_h: g.dilationH, dilation_w: g.dilationW, pad_top: g.padTop, pad_left: g.padLeft,
            pad_bottom: g.padBottom, pad_right: g.padRight, groups: g.groups, has_bias: g.hasBias ? 1 : 0,
            output_image_stride: outputImageStride)
        var message = [CChar](repeating: 0, count: 256)
        guard let h = updraft_dnnl_conv_create(&shape, pass.shimPass, relu ? 1 : 0, blocked ? 1 : 0, &message, message.count) else {
            why = String(cString: message)
            return nil
        }
        handle = h
        implementation = String(cString: updraft_dnnl_conv_implementation(h))
        scratchCount = (updraft_dnnl_conv_scratch_bytes(h) + 3) / 4
    }

    deinit { updraft_dnnl_conv_destroy(handle) }

    /// Runs the pass on `threads` threads (operands as `updraft_dnnl_conv_execute` names them), with
    /// `scratchCount` floats of `scratch` for the reordered operands.
    func run(threads: Int, _ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, bias: UnsafePointer<Float>? = nil,
             out: UnsafeMutablePointer<Float>, outBias: UnsafeMutablePointer<Float>? = nil, scratch: CPUWorkspace) throws {
        let space = scratch.floats(scratchCount)
        try oneDNNExecute("convolution (\(implementation))", hint: "set UPDRAFT_ONEDNN=off to run Updraft's own convolutions") {
            updraft_dnnl_conv_execute(handle, Int32(clamping: threads), a, b, bias, out, outBias, space, $0, $1)
        }
    }
}

/// Makes one call of a CDNNL execute function (each takes a buffer for its error message last and
/// returns 1 on success) and throws its message where it fails, as "oneDNN `what` failed".
func oneDNNExecute(_ what: String, hint: String, _ execute: (UnsafeMutablePointer<CChar>, Int) -> Int32) throws {
    var message = [CChar](repeating: 0, count: 256)
    guard message.withUnsafeMutableBufferPointer({ execute($0.baseAddress!, $0.count) }) == 1 else {
        throw UpdraftError(.device, "oneDNN \(what) failed: \(String(cString: message))", hint: hint)
    }
}

/// What a convolution primitive is made for: geometry, pass, fused ReLU, output stride and layout.
struct OneDNNConvolutionKey: Hashable {
    var geometry: ConvGeometry
    var pass: CPUConvolutionPass
    var relu: Bool
    var outputImageStride: Int
    var blocked: Bool
}

/// The oneDNN primitives a CPU backend made, per key (`make` builds one, nil where oneDNN cannot run
/// it); a key oneDNN cannot run is remembered too, so it is asked once. One for the convolutions, one
/// for pooling and inner products. Each is made for the backend's `threads`: a primitive keeps the
/// OpenMP split of the thread it was created on, so one made on a fresh thread would use every core
/// (SqueezeNet's conv10 at 197 GFLOP/s under `--threads 1`, twice what one core does).
final class OneDNNCache<Key: Hashable, Primitive>: @unchecked Sendable {
    private var primitives: [Key: Primitive?] = [:]
    private let lock = NSLock()
    private let threads: Int
    private let make: (Key) -> Primitive?

    init(threads: Int, _ make: @escaping (Key) -> Primitive?) { self.threads = threads; self.make = make }

    private var attempts = 0

    /// The cached or new primitive for `key`; nil when oneDNN cannot run it.
    func primitive(_ key: Key) -> Primitive? { lookUp(key).primitive }

    /// The cached or new primitive for `key`, and whether this call made it (asked oneDNN for it).
    func lookUp(_ key: Key) -> (primitive: Primitive?, isNew: Bool) {
        lock.lock(); defer { lock.unlock() }
        if let known = primitives[key] { return (known, false) }
        updraft_dnnl_use_threads(Int32(clamping: threads))
        let made = make(key)
        primitives[key] = .some(made)
        attempts += 1
        return (made, true)
    }

    /// How many keys oneDNN was asked to make a primitive for so far (tests: nothing is made on a
    /// prepared layer's first call).
    var creationCount: Int {
        lock.lock(); defer { lock.unlock() }
        return attempts
    }
}
