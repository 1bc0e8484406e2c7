import Foundation

/// A float32 tensor in host memory, row-major (NCHW for activations). A value type: copies are cheap
/// until written (Swift arrays are copy-on-write).
public struct Tensor: Equatable, Sendable, CustomStringConvertible {
    /// The tensor's extent; `shape.count` always equals `data.count`.
    public var shape: Shape
    /// The values in row-major order (the last dimension varies fastest).
    public var data: [Float]

    /// A tensor holding `data` in row-major order. Traps unless `data.count == shape.count`.
    public init(shape: Shape, data: [Float]) {
        precondition(shape.count == data.count, "Tensor: shape \(shape) needs \(shape.count) values, got \(data.count)")
        self.shape = shape
        self.data = data
    }

    /// A tensor of the given shape filled with zeros.
    public init(zeros shape: Shape) { self.init(shape: shape, data: [Float](repeating: 0, count: shape.count)) }

    /// A tensor of the given shape with every element set to `value`.
    public init(shape: Shape, repeating value: Float) {
        self.init(shape: shape, data: [Float](repeating: value, count: shape.count))
    }

    /// Deterministic pseudo-random values in [lo, hi): the same seed gives the same tensor everywhere.
    public init(shape: Shape, uniformIn range: ClosedRange<Float>, seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        let data = (0..<shape.count).map { _ in rng.nextFloat(in: range) }
        self.init(shape: shape, data: data)
    }

    /// Number of elements (`shape.count`).
    public var count: Int { data.count }

    /// Element at an NCHW index.
    public subscript(n: Int, c: Int, h: Int, w: Int) -> Float {
        get { data[((n * shape.c + c) * shape.h + h) * shape.w + w] }
        set { data[((n * shape.c + c) * shape.h + h) * shape.w + w] = newValue }
    }

    /// The same values under another shape with the same element count (flatten is free in NCHW).
    public func reshaped(_ shape: Shape) -> Tensor {
        precondition(shape.count == self.shape.count, "reshape \(self.shape) -> \(shape) changes the element count")
        return Tensor(shape: shape, data: data)
    }

    /// The shape and up to the first 8 values, e.g. "Tensor[1, 2](0.5, 1)".
    public var description: String {
        let head = data.prefix(8).map { String(format: "%.4g", Double($0)) }.joined(separator: ", ")
        return "Tensor\(shape)(\(head)\(data.count > 8 ? ", …" : ""))"
    }
}

/// SplitMix64: small, fast, and identical on every platform, so seeds reproduce runs exactly.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64
    /// A generator whose sequence is fully determined by `seed` (any value, 0 included).
    public init(seed: UInt64) { state = seed }
    /// The next 64 random bits (the SplitMix64 step); as `RandomNumberGenerator.next()`.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
    /// Uniform in [0, 1) with 24 bits of precision.
    public mutating func nextUnitFloat() -> Float { Float(next() >> 40) * (1.0 / 16_777_216.0) }
    /// Uniform in `range`, scaled from `nextUnitFloat()` (24 bits); the upper bound is effectively excluded.
    public mutating func nextFloat(in range: ClosedRange<Float>) -> Float {
        range.lowerBound + (range.upperBound - range.lowerBound) * nextUnitFloat()
    }
    /// Uniform in [0, 1) with 53 bits of precision.
    public mutating func nextDouble() -> Double { Double(next() >> 11) * (1.0 / 9_007_199_254_740_992.0) }
}
