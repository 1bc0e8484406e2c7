/// The definition of every op: plain loops over `[Double]` arrays, accumulating in Double.
///
/// Every fast path (OpenCL kernels, the optimized CPU backend) is checked against these functions,
/// and these functions are checked against finite differences (`GradientCheck`). They favour
/// readability over speed: one loop nest per op and direction, shapes in comments, no tricks.
///
/// Layouts follow `Backend`: activations NCHW, convolution weights `[C_out, C_in/groups, kH, kW]`,
/// inner-product weights `[C_out, C_in]`. Functions return fresh arrays (they never accumulate into
/// their arguments, except the optimizer steps, which update their state in place as the documented
/// formulas do). Array sizes are checked: a wrong size throws an `UpdraftError` naming the array.
///
/// The files `Reference+<family>.swift` hold one op family each.
public enum Reference {}

extension Reference {
    /// Throws unless `array` holds exactly `count` values.
    static func require(_ array: [Double], count: Int, _ what: @autoclosure () -> String) throws {
        guard array.count == count else {
            throw UpdraftError(.invalidArgument,
                               "reference: \(what()) has \(array.count) values, expected \(count)",
                               hint: "check the shapes passed with the geometry")
        }
    }

    /// Throws unless every value is at least 0 (sizes) or 1 (where `positive`).
    static func requireSizes(_ sizes: [(String, Int)], positive: Bool = false, op: String) throws {
        for (name, value) in sizes where value < (positive ? 1 : 0) {
            throw UpdraftError(.invalidArgument,
                               "reference \(op): \(name) is \(value), must be at least \(positive ? 1 : 0)")
        }
    }

    /// Float32 values as Double (exact).
    public static func double(_ values: [Float]) -> [Double] { values.map(Double.init) }
    /// Double values rounded to float32.
    public static func float(_ values: [Double]) -> [Float] { values.map(Float.init) }
}
