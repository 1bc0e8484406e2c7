/// Layout ops on the logical N-D shape (LogicalShape). Blob memory is row-major and contiguous per
/// example, so an op that only re-labels the shape is free: the executor gives its output the
/// input's buffer (and its input gradient the output gradient's buffer).
public enum LayoutOp: Hashable, Sendable {
    /// reshapeStatic, reshape, flattenTo2D, squeeze, expandDims, copy: the same values under another
    /// shape. `kind` is the layer type's name.
    case alias(kind: String)

    public var name: String {
        switch self {
        case let .alias(kind): return kind
        }
    }

    /// True when the output is the input's memory under another shape.
    public var isAlias: Bool {
        if case .alias = self { return true }
        return false
    }

    /// Work of the forward pass over `count` output values at the batch size the caller chose.
    public func forwardCost(count: Int) -> OpCost {
        switch self {
        case .alias: return .zero
        }
    }

    /// Work of the input-gradient pass.
    public func backwardCost(count: Int) -> OpCost {
        switch self {
        case .alias: return .zero
        }
    }
}
