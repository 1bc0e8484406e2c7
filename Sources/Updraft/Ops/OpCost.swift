/// Work and memory traffic of one op invocation: used by the benchmarks (GFLOP/s, GB/s), the
/// scheduler's cost model and the tests' size choices. One description per op, shared by all three.
public struct OpCost: Hashable, Sendable {
    /// Floating-point operations (a multiply-add counts 2).
    public var flops: Double
    /// Bytes that must move at least once (inputs read + outputs written), float32.
    public var bytes: Double
    /// A cost of `flops` floating-point operations and `bytes` bytes moved.
    public init(flops: Double, bytes: Double) { self.flops = flops; self.bytes = bytes }
    /// The combined cost of two invocations: flops and bytes each summed.
    public static func + (a: OpCost, b: OpCost) -> OpCost { OpCost(flops: a.flops + b.flops, bytes: a.bytes + b.bytes) }
    /// No work and no traffic: the identity for `+`.
    public static let zero = OpCost(flops: 0, bytes: 0)
}

/// Floats to bytes, summed in Double so that no count (however large) can overflow.
@inline(__always) func f32Bytes(_ counts: Int...) -> Double { counts.reduce(0.0) { $0 + Double($1) } * 4 }
