import Foundation

/// How close a computed value must be to its reference.
///
/// A value passes when |got - ref| <= atol + rtol * max(|ref|, rms(ref)), where rms(ref) is the
/// root-mean-square of the whole reference tensor. The rms term judges elements that are near zero
/// only through cancellation on the scale of the tensor they belong to: a float32 sum of n terms
/// carries an error proportional to the size of its terms, not of its result, so a plain
/// atol + rtol * |ref| would fail correct float32 kernels on long reductions (weight gradients sum
/// over N * Ho * Wo products). NaN or infinity in either array never passes (unless both agree exactly).
public struct Tolerance: Hashable, Sendable, CustomStringConvertible {
    /// Absolute allowance, in the values' own units (0 for `.exact`).
    public var atol: Double
    /// Relative allowance, as a fraction of max(|ref|, rms(ref)) (0 for `.exact`).
    public var rtol: Double
    /// A tolerance of `atol + rtol * max(|ref|, rms(ref))` per element (both non-negative).
    public init(atol: Double, rtol: Double) { self.atol = atol; self.rtol = rtol }

    /// Default for float32 backends compared with the Double reference: about a thousand float32
    /// ulps relative, 1e-4 absolute. Real indexing or formula bugs give errors of order 1.
    public static let float32 = Tolerance(atol: 1e-4, rtol: 1e-3)
    /// Bit-for-bit equality (counts, copies).
    public static let exact = Tolerance(atol: 0, rtol: 0)

    /// Both bounds, e.g. "atol 0.0001, rtol 0.001".
    public var description: String { "atol \(atol), rtol \(rtol)" }
}

/// The worst disagreement between two arrays.
public struct ComparisonError: Hashable, Sendable {
    /// max |got - ref|.
    public var maxAbs: Double
    /// max |got - ref| / max(|ref|, rms(ref)) (0 where both are 0; infinity where only ref's scale is 0).
    public var maxRel: Double
    /// True when every element is within the tolerance (and the lengths match).
    public var ok: Bool

    /// Compares element by element under `tolerance` (see `Tolerance`). Different lengths fail.
    public init(got: [Double], reference ref: [Double], tolerance: Tolerance) {
        guard got.count == ref.count else { maxAbs = .infinity; maxRel = .infinity; ok = false; return }
        var sumSquares = 0.0
        for r in ref where r.isFinite { sumSquares += r * r }
        let rms = ref.isEmpty ? 0 : (sumSquares / Double(ref.count)).squareRoot()
        var maxAbs = 0.0, maxRel = 0.0, ok = true
        for (g, r) in zip(got, ref) {
            if g == r { continue }  // also covers equal infinities
            let diff = abs(g - r)
            guard diff.isFinite else { maxAbs = .infinity; maxRel = .infinity; ok = false; continue }
            let scale = max(abs(r), rms)
            maxAbs = max(maxAbs, diff)
            maxRel = max(maxRel, scale > 0 ? diff / scale : .infinity)
            if !(diff <= tolerance.atol + tolerance.rtol * scale) { ok = false }
        }
        self.maxAbs = maxAbs; self.maxRel = maxRel; self.ok = ok
    }
}

/// One line of a verification report: a quantity of one case (an output, a gradient, a loss, an
/// optimizer state) and how far it is from the reference.
public struct ComparisonRow: Hashable, Sendable, CustomStringConvertible {
    /// The op family ("convolution", "pooling", …).
    public var op: String
    /// The case's name (`OpCase.name`).
    public var caseName: String
    /// What was compared: "y", "dx", "dw", "db", "loss", "correct", "w", "v", "m", … or "error".
    public var quantity: String
    /// max |got - ref| over the quantity's elements (NaN for a row that could not be computed).
    public var maxAbsError: Double
    /// max |got - ref| / max(|ref|, rms(ref)) (see `ComparisonError.maxRel`; NaN for an error row).
    public var maxRelError: Double
    /// Whether the quantity passed its tolerance; false for an error row.
    public var ok: Bool
    /// Why a row failed without numbers (an error thrown by the backend), or a remark.
    public var note: String?

    /// A row with measured errors and a verdict already decided.
    public init(op: String, caseName: String, quantity: String, maxAbsError: Double, maxRelError: Double,
                ok: Bool, note: String? = nil) {
        self.op = op; self.caseName = caseName; self.quantity = quantity
        self.maxAbsError = maxAbsError; self.maxRelError = maxRelError; self.ok = ok; self.note = note
    }

    /// A row from a `ComparisonError`, taking its errors and verdict.
    public init(op: String, caseName: String, quantity: String, error: ComparisonError, note: String? = nil) {
        self.init(op: op, caseName: caseName, quantity: quantity, maxAbsError: error.maxAbs,
                  maxRelError: error.maxRel, ok: error.ok, note: note)
    }

    /// A failed row for a case that could not be run.
    public static func failure(op: String, caseName: String, _ error: Error) -> ComparisonRow {
        ComparisonRow(op: op, caseName: caseName, quantity: "error", maxAbsError: .nan, maxRelError: .nan,
                      ok: false, note: "\(error)")
    }

    /// One line: op, case, quantity, both errors, "ok" or "FAILED", and the note in parentheses if any.
    public var description: String {
        "\(op) \(caseName) \(quantity): max abs \(formatError(maxAbsError)), max rel \(formatError(maxRelError)) "
            + (ok ? "ok" : "FAILED") + (note.map { " (\($0))" } ?? "")
    }

    /// A fixed-width table of rows, one per line, with a header.
    public static func table(_ rows: [ComparisonRow]) -> String {
        let header = ["op", "case", "quantity", "max abs err", "max rel err", "ok"]
        var cells = [header]
        for r in rows {
            cells.append([r.op, r.caseName, r.quantity, formatError(r.maxAbsError), formatError(r.maxRelError),
                          (r.ok ? "ok" : "FAILED") + (r.note.map { "  " + oneLine($0) } ?? "")])
        }
        let widths = (0..<header.count - 1).map { col in cells.map { $0[col].count }.max() ?? 0 }
        return cells.map { row in
            (0..<header.count - 1).map { row[$0].padding(toLength: widths[$0] + 2, withPad: " ", startingAt: 0) }
                .joined() + row[header.count - 1]
        }.joined(separator: "\n") + "\n"
    }
}

/// A multi-line message (an error with its hint) on one table line.
func oneLine(_ text: String) -> String {
    text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: "; ")
}

func formatError(_ value: Double) -> String {
    value.isNaN ? "-" : value.isInfinite ? "inf" : value == 0 ? "0" : String(format: "%.2e", value)
}
