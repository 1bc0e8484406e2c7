import UpdraftCore

/// The parameter messages of the spatial layers (NeuralNetwork.proto field numbers in comments):
/// padding (200), lrn (180) and l2normalize (170), read and written (upsample: Layers+Resample.swift).
/// PaddingLayerParams. `mode` is nil when the file sets no PaddingType.
public struct PaddingLayerParams: Hashable, Sendable {
    /// constant (1) with value (1), reflection (2), replication (3).
    public var mode: PaddingMode?
    /// paddingAmounts (10): BorderAmounts, [height, width] edge sizes.
    public var top: Int, bottom: Int, left: Int, right: Int

    /// A padding layer with `mode` (nil: none stored) and the four edge sizes in pixels.
    public init(mode: PaddingMode?, top: Int, bottom: Int, left: Int, right: Int) {
        self.mode = mode; self.top = top; self.bottom = bottom; self.left = left; self.right = right
    }
}

/// LRNLayerParams: alpha (1), beta (2), localSize (3), k (4; 0 reads as Core ML's default 1).
public struct LRNLayerParams: Hashable, Sendable {
    /// alpha (1), beta (2) and k (4) of y = x / (k + alpha / localSize * sum of x² over the window)^beta, as stored.
    public var alpha: Float, beta: Float, k: Float
    /// localSize (3): number of neighbouring channels in the normalization window.
    public var localSize: Int
    /// An LRN layer with the given parameters, as stored (k 0 means Core ML's 1).
    public init(alpha: Float, beta: Float, localSize: Int, k: Float) {
        self.alpha = alpha; self.beta = beta; self.localSize = localSize; self.k = k
    }
}

extension PaddingLayerParams {
    init(reading r: ProtoReader) throws {
        mode = nil
        if let f = r.lastOf([1, 2, 3]) {
            switch f.number {
            case 1: mode = .constant(try r.child(f, named: "constant").float(1, "value") ?? 0)
            case 2: mode = .reflection
            default: mode = .replication
            }
        }
        let b = try borderAmounts(try r.message(10, "paddingAmounts"))
        (top, bottom, left, right) = (b.top, b.bottom, b.left, b.right)
    }

    func encoded(into w: inout MessageWriter) {
        switch mode {
        case let .constant(v)?: w.message(1) { m in m.float(1, v) }
        case .reflection?: w.message(2, ProtoMessage())
        case .replication?: w.message(3, ProtoMessage())
        case nil: break
        }
        w.message(10, borderAmounts(top: top, bottom: bottom, left: left, right: right))
    }
}

extension LRNLayerParams {
    init(reading r: ProtoReader) throws {
        alpha = try r.float(1, "alpha") ?? 0
        beta = try r.float(2, "beta") ?? 0
        localSize = try r.size(3, "localSize") ?? 0
        k = try r.float(4, "k") ?? 0
    }

    func encoded(into w: inout MessageWriter) {
        w.float(1, alpha)
        w.float(2, beta)
        w.size(3, localSize)
        w.float(4, k)
    }
}
