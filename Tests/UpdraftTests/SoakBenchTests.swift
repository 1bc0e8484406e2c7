import Foundation
import XCTest

/// `updraft-bench soak` at a tiny size (`make soak` runs 1,000 tasks and 20 kills): 20 update tasks
/// 4 at a time with cancellations and bad inputs, and one `updraft train` run killed with SIGKILL and
/// resumed. Nothing may be counted as crashed, lost, corrupt or differing.
final class SoakBenchTests: FolderTestCase {
    func testTinySoakCountsNoCrashLossOrDifference() throws {
        let run = try runUpdraft(["soak", "--tasks", "20", "--concurrent", "4", "--kills", "1", "--seed", "2", "--json"],
                                 program: "updraft-bench", cacheDirectory: folder.appendingPathComponent("cache"))
        XCTAssertEqual(run.status, 0, "the soak failed:\n\(run.stdout)\n\(run.stderr)")
        let report = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any], run.stdout)
        XCTAssertEqual(report["tasks"] as? Int, 20)
        XCTAssertEqual(report["crashes"] as? Int, 0, "the task process died: \(run.stderr)")
        let tasks = try XCTUnwrap(report["taskPhase"] as? [String: Any], "no report from the task process")
        let problems = (tasks["problems"] as? [String] ?? []).joined(separator: "\n")
        for key in ["unexpectedFailures", "lostModels", "corruptModels", "unchangedModels", "repeatsDiffering", "refusedUnclearly",
                    "acceptedBadInputs"] {
            XCTAssertEqual(tasks[key] as? Int, 0, "\(key): \(problems)")
        }
        let completed = try XCTUnwrap(tasks["completed"] as? Int), cancelled = try XCTUnwrap(tasks["cancelled"] as? Int)
        let refused = try XCTUnwrap(tasks["refusedClearly"] as? Int)
        XCTAssertEqual(completed + cancelled + refused, 20, "every task ends completed, cancelled or refused")
        XCTAssertEqual(tasks["modelsWritten"] as? Int, completed + cancelled, "every task that ended with a model wrote it")
        // Seed 2 draws bad inputs and cancellations among the 20 (the plan depends on the seed alone).
        XCTAssertGreaterThan(refused, 0, "bad inputs were mixed in")
        XCTAssertGreaterThan(cancelled, 0, "tasks were cancelled")
        XCTAssertEqual((tasks["residentMiB"] as? [Double])?.count, 20, "resident memory sampled after each task")

        let kills = try XCTUnwrap(report["kills"] as? [String: Any])
        let killProblems = (kills["problems"] as? [String] ?? []).joined(separator: "\n")
        for key in ["crashes", "failures", "corruptFiles", "lostModels", "resumesDiffering"] {
            XCTAssertEqual(kills[key] as? Int, 0, "\(key): \(killProblems)")
        }
        XCTAssertGreaterThanOrEqual(kills["kills"] as? Int ?? 0, 1, "a SIGKILL landed")
        let finished = try XCTUnwrap(kills["runs"] as? Int)
        XCTAssertGreaterThanOrEqual(finished, 1)
        XCTAssertEqual(kills["identical"] as? Int, finished, "every killed run resumed to the uninterrupted run's model")
        XCTAssertEqual(report["passed"] as? Bool, true)
    }
}
