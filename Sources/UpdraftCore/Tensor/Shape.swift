/// The extent of a tensor, outermost dimension first. Updraft's activations are NCHW:
/// `[batch, channels, height, width]`; weights keep Core ML's layouts
/// (convolution `[C_out, C_in/groups, kH, kW]`, inner product `[C_out, C_in]`).
public struct Shape: Hashable, Sendable, CustomStringConvertible, ExpressibleByArrayLiteral {
    /// The extent of each dimension, outermost first; an empty array is a scalar (rank 0).
    public var dims: [Int]

    /// Largest size a model may give one dimension (channels, kernel, image side, scale factor):
    /// what the layer and op checks accept before anything is allocated.
    package static let maxDimension = 1 << 24

    /// A shape with these dimensions, outermost first.
    public init(_ dims: [Int]) { self.dims = dims }
    /// A shape from a literal such as `[1, 3, 224, 224]`.
    public init(arrayLiteral elements: Int...) { self.dims = elements }
    /// An NCHW activation shape.
    public init(n: Int, c: Int, h: Int, w: Int) { self.dims = [n, c, h, w] }

    /// Number of dimensions.
    public var rank: Int { dims.count }
    /// Number of elements (1 for a rank-0 shape).
    public var count: Int { dims.reduce(1, *) }
    /// The extent of dimension `i` (0 is outermost); traps if `i` is out of range.
    public subscript(i: Int) -> Int { dims[i] }

    // NCHW accessors; a rank-2 shape [N, C] reads as H = W = 1.
    /// Batch size: dimension 0, or 1 for a rank-0 shape.
    public var n: Int { dims.isEmpty ? 1 : dims[0] }
    /// Channels: dimension 1, or 1 below rank 2.
    public var c: Int { dims.count > 1 ? dims[1] : 1 }
    /// Height: dimension 2, or 1 below rank 3.
    public var h: Int { dims.count > 2 ? dims[2] : 1 }
    /// Width: dimension 3, or 1 below rank 4.
    public var w: Int { dims.count > 3 ? dims[3] : 1 }
    /// Elements per batch item.
    public var itemCount: Int { dims.count > 1 ? dims.dropFirst().reduce(1, *) : 1 }

    /// The dimensions in brackets, e.g. "[1, 3, 224, 224]".
    public var description: String { "[" + dims.map(String.init).joined(separator: ", ") + "]" }
}
