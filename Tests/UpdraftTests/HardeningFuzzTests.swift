import XCTest
@testable import UpdraftModel
@testable import UpdraftChecks

/// The model half of issue 13's fuzz test: mutated models through the reader, the validator and
/// the planner, with fixed seeds; no trap (the test process would die), no disagreement between
/// the validator and the planner. Bounded to about ten seconds; `make fuzz` runs 100,000.
final class HardeningFuzzTests: XCTestCase {
    func testMutatedModelsNeverCrashReaderValidatorOrPlanner() throws {
        let seeds = try ModelFuzzing.seedModels()
        // The starting points themselves are valid and plan.
        for s in seeds { XCTAssertEqual(try ModelFuzzing.check(s), .planned) }
        var counts: [ModelFuzzing.Outcome: Int] = [:]
        let start = Date()
        var index = 0
        while index < 2_000 && Date().timeIntervalSince(start) < 10 {
            do {
                counts[try ModelFuzzing.run(index: index, seed: 13, seeds: seeds), default: 0] += 1
            } catch {
                XCTFail("\(error)")
            }
            index += 1
        }
        XCTAssertGreaterThanOrEqual(index, 100, "too few models in the time: \(counts)")
        // The mutations reach every stage: some are refused by the reader, some by the validator, some plan.
        for outcome in ModelFuzzing.Outcome.allCases { XCTAssertGreaterThan(counts[outcome] ?? 0, 0, "\(counts)") }
    }

    /// Field values the fuzzer found or the issue named, kept as fixed cases.
    func testHostileFieldValues() throws {
        for batch in [0, -1, Int.max, 1 << 62] {
            var (model, _) = try (HardeningSizeTests.imageModel(batch: 4), 0)
            var spec = model.spec
            spec.network.updateParameters?.optimizer?.miniBatchSize?.defaultValue = Int64(batch)
            model = CoreMLModel(spec: spec)
            XCTAssertNotEqual(try ModelFuzzing.check(model.serializedBytes(), batches: [batch]), .planned, "default batch \(batch)")
        }
    }
}
