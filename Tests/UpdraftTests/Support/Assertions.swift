import XCTest
@testable import UpdraftCore

// Assertions and test data shared by the test files (one place, so every comparison means the same).

/// Asserts |got - want| <= tolerance * max(1, |want|) element-wise, reporting the first mismatches.
func assertClose(_ got: [Float], _ want: [Double], tolerance: Double = 1e-5, _ what: @autoclosure () -> String,
                 file: StaticString = #filePath, line: UInt = #line) {
    guard got.count == want.count else {
        return XCTFail("\(what()): \(got.count) values, expected \(want.count)", file: file, line: line)
    }
    var bad: [String] = []
    for i in 0..<got.count where !(abs(Double(got[i]) - want[i]) <= tolerance * max(1, abs(want[i]))) {
        if bad.count < 5 { bad.append("[\(i)] \(got[i]) vs \(want[i])") }
        else { bad.append("…"); break }
    }
    if !bad.isEmpty { XCTFail("\(what()): " + bad.joined(separator: ", "), file: file, line: line) }
}

/// Asserts |actual - expected| <= atol + rtol * |expected| everywhere; reports the first element that is not.
func assertWithin(_ actual: [Float], _ expected: [Double], atol: Double = 1e-4, rtol: Double = 1e-4,
                  _ what: String, file: StaticString = #filePath, line: UInt = #line) {
    XCTAssertEqual(actual.count, expected.count, "\(what): count", file: file, line: line)
    for i in 0..<min(actual.count, expected.count) {
        let diff = abs(Double(actual[i]) - expected[i])
        if !(diff <= atol + rtol * abs(expected[i])) {
            XCTFail("\(what)[\(i)] = \(actual[i]), expected \(expected[i])", file: file, line: line)
            return
        }
    }
}

/// `count` floats drawn uniformly from `range` by a seeded SplitMix64: the same values on every run.
func randomFloats(_ count: Int, seed: UInt64, in range: ClosedRange<Float> = -1...1) -> [Float] {
    var rng = SplitMix64(seed: seed)
    return (0..<count).map { _ in rng.nextFloat(in: range) }
}

/// A weighted layer's operands (convolution, inner product): x, w, b (nil without a bias) and dy, of
/// these counts, drawn by `randomFloats` from seeds `seed` to `seed + 3`.
func randomWeightedOperands(x: Int, w: Int, bias: Int?, dy: Int, seed: UInt64)
    -> (x: [Float], w: [Float], b: [Float]?, dy: [Float]) {
    (randomFloats(x, seed: seed), randomFloats(w, seed: seed + 1), bias.map { randomFloats($0, seed: seed + 2) },
     randomFloats(dy, seed: seed + 3))
}

/// Two runs' mini-batch losses: `steps` of them each, equal within 1e-4 relative, and moving.
func assertLossesAgree(_ a: [Double], _ b: [Double], steps: Int, _ what: String, file: StaticString = #filePath, line: UInt = #line) {
    XCTAssertEqual(a.count, steps, file: file, line: line)
    XCTAssertEqual(a.count, b.count, file: file, line: line)
    for (i, (x, y)) in zip(a, b).enumerated() {
        XCTAssertEqual(x, y, accuracy: 1e-4 * max(abs(x), 1e-3), "\(what), step \(i): \(x) vs \(y)", file: file, line: line)
    }
    XCTAssertNotEqual(a.first, a.last, "the loss must move", file: file, line: line)
}
