import UpdraftCore

/// Runs op cases on any `Backend` and on `Reference`, with the same seeded float32 data, and
/// compares every result: forward outputs, every gradient, losses, correct counts and optimizer
/// states. This is how the OpenCL and optimized CPU backends are tested:
///
///     let rows = BackendComparison(backend: myBackend).run(.full)
///     XCTAssert(rows.allSatisfy(\.ok), ComparisonRow.table(rows.filter { !$0.ok }))
///
/// Each backward op is fed the reference's forward results (rounded to float32) where it needs
/// them, so a row measures one kernel, not the errors of the one before it. Output buffers are
/// filled with a sentinel before each op, so a kernel that accumulates instead of writing, or
/// leaves elements unwritten, fails. A backend that throws yields one failed row ("error") naming
/// the error; the other cases still run.
public struct BackendComparison {
    /// The backend under test; every result it produces is compared with `Reference`.
    public var backend: Backend
    /// Tolerance for values computed in float32 (see `Tolerance`); copies and counts must match exactly.
    public var tolerance: Tolerance
    /// Mixed into every case's seed, to rerun the same cases on other data.
    public var seed: UInt64

    /// A comparison of `backend` with the reference; tolerance `.float32` and seed 0 by default.
    public init(backend: Backend, tolerance: Tolerance = .float32, seed: UInt64 = 0) {
        self.backend = backend; self.tolerance = tolerance; self.seed = seed
    }

    /// Value written into output buffers before an op runs.
    public static let sentinel: Float = 7.25

    /// Rows for every case whose op name contains `filter` (case-insensitive; nil or "" runs all).
    public func run(_ cases: [OpCase], only filter: String? = nil) -> [ComparisonRow] {
        cases.filter { $0.matches(filter) }.flatMap { run($0) }
    }

    /// The rows of one case: one per compared quantity.
    public func run(_ c: OpCase) -> [ComparisonRow] {
        var session = ComparisonSession(backend: backend, case: c, tolerance: tolerance, seed: seed)
        do {
            try session.compare()
        } catch {
            session.rows.append(.failure(op: c.op, caseName: c.name, error))
        }
        return session.rows
    }
}

/// The state of one case's comparison: the data source, the backend and the rows so far. A family's
/// `VerifiedOp.compare(in:)` draws its data here, runs the backend and records each result.
public struct ComparisonSession {
    let backend: Backend
    let opCase: OpCase
    let tolerance: Tolerance
    var rng: SplitMix64
    var rows: [ComparisonRow] = []

    init(backend: Backend, case c: OpCase, tolerance: Tolerance, seed: UInt64) {
        self.backend = backend; self.opCase = c; self.tolerance = tolerance
        self.rng = SplitMix64(seed: c.seed(seed))
    }

    // MARK: Data and buffers

    /// `count` float32 values: uniform in `range`, or coarse (-1, -0.5, 0, 0.5, 1) for `.coarse` cases.
    mutating func values(_ count: Int, _ range: ClosedRange<Float> = -1...1) -> [Float] {
        switch opCase.values {
        case .uniform: return (0..<count).map { _ in rng.nextFloat(in: range) }
        case .coarse: return (0..<count).map { _ in Float(Int(rng.next() % 5) - 2) / 2 }
        }
    }

    /// Class indices in 0..<classes, as floats.
    mutating func labels(_ count: Int, classes: Int) -> [Float] {
        (0..<count).map { _ in Float(rng.next() % UInt64(max(classes, 1))) }
    }

    func upload(_ values: [Float]) throws -> DeviceBuffer { try backend.makeBuffer(values) }
    /// An output buffer, pre-filled with the sentinel.
    func output(_ count: Int) throws -> DeviceBuffer {
        try backend.makeBuffer([Float](repeating: BackendComparison.sentinel, count: count))
    }
    func download(_ buffer: DeviceBuffer) throws -> [Double] { try backend.download(buffer).map(Double.init) }

    mutating func record(_ quantity: String, _ buffer: DeviceBuffer, _ reference: [Double],
                         tolerance: Tolerance? = nil) throws {
        record(quantity, try download(buffer), reference, tolerance: tolerance)
    }

    mutating func record(_ quantity: String, _ got: [Double], _ reference: [Double], tolerance: Tolerance? = nil) {
        rows.append(ComparisonRow(op: opCase.op, caseName: opCase.name, quantity: quantity,
                                  error: ComparisonError(got: got, reference: reference,
                                                         tolerance: tolerance ?? self.tolerance)))
    }
}

/// Float32 data as the reference sees it.
func asDouble(_ values: [Float]) -> [Double] { values.map(Double.init) }
/// Reference results as a backend would receive them.
func asFloat(_ values: [Double]) -> [Float] { values.map(Float.init) }

extension ComparisonSession {
    mutating func compare() throws { try opCase.subject.compare(in: &self) }

    /// A one-input op's forward ("y") and input gradient ("dx"), each against the reference: x drawn in
    /// `range`, then dy; the backend's backward is fed the reference's y rounded to float32, the
    /// reference's backward is given (x, the reference's y, dy).
    mutating func compareOneInput(inputCount: Int, outputCount: Int, range: ClosedRange<Float> = -1...1,
                                  forward: (_ x: DeviceBuffer, _ y: DeviceBuffer) throws -> Void,
                                  reference: (_ x: [Double]) throws -> [Double],
                                  backward: (_ x: DeviceBuffer, _ y: DeviceBuffer, _ dy: DeviceBuffer, _ dx: DeviceBuffer) throws -> Void,
                                  referenceBackward: (_ x: [Double], _ y: [Double], _ dy: [Double]) throws -> [Double]) throws {
        let x = values(inputCount, range), dy = values(outputCount)
        let xb = try upload(x), y = try output(outputCount)
        try forward(xb, y)
        let yRef = try reference(asDouble(x))
        try record("y", y, yRef)
        let dx = try output(inputCount)
        try backward(xb, try upload(asFloat(yRef)), try upload(dy), dx)
        try record("dx", dx, referenceBackward(asDouble(x), yRef, asDouble(dy)))
    }
}
