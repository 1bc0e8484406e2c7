import UpdraftCore

/// Finite-difference checks of the reference gradients.
///
/// For an op y = f(x1, x2, …) the checker projects the output on a fixed random vector r, so that
/// L = sum(r * y) is a scalar whose gradient is exactly what the op's backward returns for dy = r.
/// Each element of each differentiable input is then nudged by ±h and the central difference
/// (L(x + h) - L(x - h)) / 2h compared with the analytic gradient. Everything runs in Double, so
/// the differences agree with correct gradients to about 1e-10 relative; `tolerance` (1e-6 relative)
/// leaves orders of margin, while a wrong gradient (a missed term, a wrong index, a factor) fails by far more.
///
/// The cases keep their data away from kinks, where a central difference is meaningless: ReLU
/// inputs are at least 0.1 from zero, max-pooling inputs are distinct (no ties), and a fused-ReLU
/// convolution refuses data whose pre-activations come within 1e-4 of zero.
///
/// Optimizers have no gradient; their rows compare a few steps of the reference update with the
/// closed form of the documented formula (see GradientCheck+Optimizers.swift).
public enum GradientCheck {
    /// The finite-difference step.
    public static let step = 1e-5
    /// FD-vs-analytic tolerance (see `Tolerance` for how it is applied).
    public static let tolerance = Tolerance(atol: 1e-7, rtol: 1e-6)

    /// One argument of a function under check.
    public struct Input {
        /// Short name; the gradient row is called "d" + name ("dx", "dw", "db").
        public var name: String
        /// The point at which the gradient is checked; each element is nudged by ±`GradientCheck.step`.
        public var values: [Double]
        /// False for arguments that have no gradient (labels, targets, frozen scales).
        public var differentiable: Bool
        /// An argument named `name` (the row is "d" + name) at `values`; differentiable unless told otherwise.
        public init(_ name: String, _ values: [Double], differentiable: Bool = true) {
            self.name = name; self.values = values; self.differentiable = differentiable
        }
    }

    /// A function and its claimed gradient: `backward(inputs, dy)` returns, for every input, the
    /// gradient of sum(dy * forward(inputs)) with respect to it (nil where not differentiable).
    public struct Problem {
        /// The function's arguments, in the order `forward` and `backward` take them.
        public var inputs: [Input]
        /// y = f(inputs' values); may throw (a failed row results).
        public var forward: ([[Double]]) throws -> [Double]
        /// (inputs' values, dy) -> one gradient per input, nil for non-differentiable ones; may throw.
        public var backward: ([[Double]], [Double]) throws -> [[Double]?]
        /// A problem of these inputs, the function and its claimed gradient.
        public init(inputs: [Input], forward: @escaping ([[Double]]) throws -> [Double],
                    backward: @escaping ([[Double]], [Double]) throws -> [[Double]?]) {
            self.inputs = inputs; self.forward = forward; self.backward = backward
        }
    }

    /// Checks every case whose op matches `filter` (see `OpCase.matches`); one row per gradient
    /// (or optimizer state), failed rows for cases that cannot be built.
    public static func run(_ cases: [OpCase], only filter: String? = nil) -> [ComparisonRow] {
        cases.filter { $0.matches(filter) }.flatMap { check($0) }
    }

    /// The rows of one case. Memory cases have nothing to differentiate and give no rows.
    public static func check(_ c: OpCase) -> [ComparisonRow] {
        var rng = SplitMix64(seed: c.seed())
        do {
            return try c.subject.gradientRows(c, rng: &rng)
        } catch {
            return [.failure(op: c.op, caseName: c.name, error)]
        }
    }

    /// Checks any function against its claimed gradient; one row per differentiable input.
    public static func check(op: String, caseName: String, _ problem: Problem, seed: UInt64 = 1) -> [ComparisonRow] {
        do {
            var values = problem.inputs.map(\.values)
            let y = try problem.forward(values)
            var rng = SplitMix64(seed: seed)
            let r = (0..<y.count).map { _ in 2 * rng.nextDouble() - 1 }  // L = sum(r * y)
            let analytic = try problem.backward(values, r)
            guard analytic.count == problem.inputs.count else {
                throw UpdraftError(.invalidArgument, "backward returned \(analytic.count) gradients for \(problem.inputs.count) inputs")
            }
            func loss(_ v: [[Double]]) throws -> Double {
                let y = try problem.forward(v)
                guard y.count == r.count else {
                    throw UpdraftError(.invalidArgument, "forward returned \(y.count) values, then \(r.count)")
                }
                var sum = 0.0
                for i in 0..<y.count { sum += r[i] * y[i] }
                return sum
            }
            var rows: [ComparisonRow] = []
            for (i, input) in problem.inputs.enumerated() where input.differentiable {
                let quantity = "d" + input.name
                guard let gradient = analytic[i], gradient.count == input.values.count else {
                    rows.append(ComparisonRow(op: op, caseName: caseName, quantity: quantity, maxAbsError: .nan,
                                              maxRelError: .nan, ok: false,
                                              note: "backward gave no gradient of \(input.values.count) values"))
                    continue
                }
                var numeric = [Double](repeating: 0, count: input.values.count)
                for j in 0..<input.values.count {
                    let original = values[i][j]
                    values[i][j] = original + step
                    let plus = try loss(values)
                    values[i][j] = original - step
                    let minus = try loss(values)
                    values[i][j] = original
                    numeric[j] = (plus - minus) / (2 * step)
                }
                rows.append(ComparisonRow(op: op, caseName: caseName, quantity: quantity,
                                          error: ComparisonError(got: gradient, reference: numeric, tolerance: tolerance)))
            }
            return rows
        } catch {
            return [.failure(op: op, caseName: caseName, error)]
        }
    }
}

// MARK: Data away from kinks

extension GradientCheck {
    static func uniform(_ count: Int, _ range: ClosedRange<Double> = -1...1, _ rng: inout SplitMix64) -> [Double] {
        (0..<count).map { _ in range.lowerBound + (range.upperBound - range.lowerBound) * rng.nextDouble() }
    }

    /// Values with |x| in [0.1, 1] and random sign: no ReLU kink within reach of the step.
    static func awayFromZero(_ count: Int, _ rng: inout SplitMix64) -> [Double] {
        (0..<count).map { _ in (rng.next() & 1 == 0 ? 1 : -1) * (0.1 + 0.9 * rng.nextDouble()) }
    }

    /// A shuffled arithmetic sequence: every value distinct by at least 1e-3, so no max-pooling window
    /// has a tie or a near-tie within the step.
    static func distinct(_ count: Int, _ rng: inout SplitMix64) -> [Double] {
        var order = Array(0..<count)
        for i in stride(from: count - 1, to: 0, by: -1) {  // Fisher-Yates with the seeded generator
            order.swapAt(i, Int(rng.next() % UInt64(i + 1)))
        }
        let spacing = max(2.0 / Double(max(count, 1)), 1e-3)
        return order.map { (Double($0) - Double(count) / 2) * spacing }
    }
}
