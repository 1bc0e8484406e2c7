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
@inline(__always) package func f32Bytes(_ counts: Int...) -> Double { counts.reduce(0.0) { $0 + Double($1) } * 4 }

/// One Backend call's work.
public struct KernelWork: Hashable, Sendable {
    /// The kernel's floating-point operations and bytes moved.
    public var cost: OpCost
    /// Convolution and matrix products, which reach only `matrixEfficiency` of the peak rate.
    public var isMatrix: Bool
    /// Work of `cost`; `isMatrix` for convolutions and matrix products (default false).
    public init(_ cost: OpCost, isMatrix: Bool = false) { self.cost = cost; self.isMatrix = isMatrix }
}

/// The kernels one layer launches for one batch.
public struct LayerWork: Hashable, Sendable {
    /// The forward pass's kernels.
    public var forward: [KernelWork] = []
    /// The input gradient (dx), when a layer upstream needs it.
    public var backwardData: [KernelWork] = []
    /// The parameter gradients, for updatable layers.
    public var backwardWeights: [KernelWork] = []
    /// The optimizer step on the parameters, for updatable layers.
    public var optimizer: [KernelWork] = []

    package init() {}

    package static func total(_ kernels: [KernelWork]) -> OpCost { kernels.reduce(OpCost.zero) { $0 + $1.cost } }
    /// Everything the layer launches.
    public var all: [KernelWork] { forward + backwardData + backwardWeights + optimizer }
}
