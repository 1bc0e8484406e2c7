import UpdraftCore

/// One op family's part of the verification tools: what a case of it computes, on the reference and
/// on a backend. Each family conforms in its own file (`OpCase+<Family>.swift`: the conforming type,
/// its case builders, its rows in the shared lists, its finite-difference problem and its backend
/// comparison), so adding a family touches no switch: `GradientCheck`, `BackendComparison`, the
/// benchmarks and `updraft gradcheck` reach every family through this protocol.
public protocol VerifiedOp: Hashable, Sendable {
    /// The op family name that `--op` filters and report rows use ("convolution", "reduce", …).
    var opName: String { get }
    /// A finer name `--op` also matches (a reduction's Core ML layer name, "reduceL1", …); nil by default.
    var variantName: String? { get }
    /// The parameters in a few words: the default case name.
    var summary: String { get }
    /// The function and its claimed gradient for finite differences, drawn from `rng` away from kinks;
    /// nil for a family with nothing to difference (memory) or checked otherwise (optimizers).
    func gradientProblem(rng: inout SplitMix64) throws -> GradientCheck.Problem?
    /// The finite-difference rows of case `c`; by default `gradientProblem` checked by `GradientCheck.check`.
    func gradientRows(_ c: OpCase, rng: inout SplitMix64) throws -> [ComparisonRow]
    /// Runs the op on `session`'s backend with the session's data and records every result against
    /// the reference (`ComparisonSession.record`).
    func compare(in session: inout ComparisonSession) throws
}

extension VerifiedOp {
    public var variantName: String? { nil }

    /// The subject as a hashable value, for `OpCase`'s equality.
    var hashKey: AnyHashable { AnyHashable(self) }

    public func gradientRows(_ c: OpCase, rng: inout SplitMix64) throws -> [ComparisonRow] {
        guard let problem = try gradientProblem(rng: &rng) else { return [] }
        return GradientCheck.check(op: c.op, caseName: c.name, problem, seed: c.seed(1))
    }
}

/// One op invocation to verify: which op, its parameters and sizes, and a readable name.
///
/// The same descriptions drive the finite-difference checks (`GradientCheck`), the backend
/// comparisons (`BackendComparison`) and the benchmarks, so a failing row names a case that every
/// tool can rerun. Data is not part of the description: each tool draws it from a seed derived
/// from the case's name, so the same case always sees the same values.
public struct OpCase: Hashable, Sendable, CustomStringConvertible {
    /// How the tools draw the case's data.
    public enum InputValues: Hashable, Sendable {
        /// Uniform random values (ranges chosen per op).
        case uniform
        /// Only -1, -0.5, 0, 0.5 and 1: many exact ties (max pooling's "first maximum" rule, arg-max).
        case coarse
    }

    /// The op, its parameters and sizes (batch included): one family's `VerifiedOp`.
    public var subject: any VerifiedOp
    /// How the data is drawn; `.uniform` by default.
    public var values: InputValues
    /// A readable name, unique within a case list, e.g. "[3, 7, 31, 33] → 32 k3x3 s2 pad 1/0/1/0".
    public var name: String

    /// A case of `subject` (written as the family's builder: `OpCase(.softmax(geometry))`); without
    /// `name`, the name is the subject's summary, plus " ties" for coarse values.
    public init(_ subject: some VerifiedOp, values: InputValues = .uniform, name: String? = nil) {
        self.subject = subject
        self.values = values
        self.name = name ?? (subject.summary + (values == .coarse ? " ties" : ""))
    }

    /// The subject as the family type `T`, or nil for another family's case.
    public func subject<T: VerifiedOp>(as type: T.Type) -> T? { subject as? T }

    /// The op family, as `--op` filters match it: "convolution", "pooling", "sgd", ….
    public var op: String { subject.opName }
    /// The op family and the case name, e.g. "pooling max [2, 3, 8, 8] k2x2 s2x2"; also the seed's input.
    public var description: String { "\(op) \(name)" }

    /// True when `filter` is nil or empty, or occurs in the op name (case-insensitive).
    public func matches(_ filter: String?) -> Bool {
        guard let filter, !filter.isEmpty else { return true }
        let f = filter.lowercased()
        return op.lowercased().contains(f) || (subject.variantName?.lowercased().contains(f) ?? false)
    }

    /// A seed derived from the op and the name (FNV-1a), so data does not depend on a case's position in a list.
    public func seed(_ base: UInt64 = 0) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325 ^ base
        for byte in description.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        return hash
    }

    public static func == (a: OpCase, b: OpCase) -> Bool {
        a.name == b.name && a.values == b.values && a.subject.hashKey == b.subject.hashKey
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(name); hasher.combine(values); hasher.combine(subject.hashKey)
    }
}
