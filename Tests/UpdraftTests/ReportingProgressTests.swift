import Foundation
import XCTest
@testable import UpdraftTraining

/// The progress line's elapsed time, rate and ETA; and `train` printing it when piped.
final class ReportingProgressTests: XCTestCase {
    func testRateAndETAComeFromTheRecentMiniBatches() {
        var e = ProgressEstimate(totalBatches: 100, batchSize: 10, start: 1000)
        XCTAssertNil(e.examplesPerSecond)
        XCTAssertEqual(e.summary, "elapsed 0:00  ETA -")
        // A slow first batch (setup, the cache filling), then 2 batches a second.
        e.record(done: 1, at: 1010)
        for i in 2...40 { e.record(done: i, at: 1010 + Double(i - 1) * 0.5) }
        XCTAssertEqual(e.done, 40)
        XCTAssertEqual(e.elapsed, 29.5, accuracy: 1e-9)
        XCTAssertEqual(e.examplesPerSecond!, 20, accuracy: 1e-9, "the window has left the slow start behind")
        XCTAssertEqual(e.remaining!, 30, accuracy: 1e-9, "60 batches of 10 at 20 images/s")
        XCTAssertEqual(e.summary, "elapsed 0:30  ETA 0:30  20.0 images/s")
    }

    func testAResumedRunCountsOnlyWhatItTrained() {
        var e = ProgressEstimate(totalBatches: 100, batchSize: 4, start: 0)
        e.record(done: 91, at: 2)
        e.record(done: 92, at: 4)
        XCTAssertEqual(e.examplesPerSecond!, 2, accuracy: 1e-9)
        XCTAssertEqual(e.remaining!, 16, accuracy: 1e-9)
    }

    func testClockFormats() {
        XCTAssertEqual(ProgressEstimate.clock(59.4), "0:59")
        XCTAssertEqual(ProgressEstimate.clock(61), "1:01")
        XCTAssertEqual(ProgressEstimate.clock(3725), "1:02:05")
        XCTAssertEqual(ProgressEstimate.clock(nil), "-")
        XCTAssertEqual(ProgressEstimate.clock(.infinity), "-")
        XCTAssertEqual(ProgressEstimate.clock(-1), "-")
    }

    func testPipedTrainingPrintsPlainProgressLines() throws {
        let fm = FileManager.default
        let dir = fm.temporaryDirectory.appendingPathComponent("progress-\(UUID().uuidString)")
        try fm.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? fm.removeItem(at: dir) }
        let model = dir.appendingPathComponent("s.mlmodel").path
        let digits = ReadmeExampleTests.packageRoot.appendingPathComponent("Tests/Data/digits/validation").path
        XCTAssertEqual(try runUpdraft(["create", "squeezenet", "--classes", "10", "--input-size", "48", "--out", model],
                                      cacheDirectory: dir).status, 0)
        let run = try runUpdraft(["train", model, "--train", digits, "--epochs", "1", "--batch-size", "64",
                                  "--compute-units", "cpuOnly", "--out", dir.appendingPathComponent("t.mlmodel").path],
                                 cacheDirectory: dir, environment: ["UPDRAFT_PROGRESS_SECONDS": "0"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let lines = run.stdout.split(separator: "\n").filter { $0.contains("  batch ") }
        XCTAssertGreaterThan(lines.count, 1, run.stdout)
        XCTAssertTrue(lines.allSatisfy { $0.contains("elapsed ") && $0.contains("ETA ") }, run.stdout)
        XCTAssertFalse(run.stdout.contains("\r"), "no carriage returns when stdout is not a terminal")
    }
}

/// Every JSON Lines event says when it happened.
final class ReportingLogTimestampTests: XCTestCase {
    func testTimestampsAreUTCWithMilliseconds() {
        XCTAssertEqual(JSONLinesLog.timestamp(0), "1970-01-01T00:00:00.000Z")
        XCTAssertEqual(JSONLinesLog.timestamp(1_796_142_912.345), "2026-12-01T16:35:12.345Z")
        XCTAssertEqual(JSONLinesLog.timestamp(951_782_400.9999), "2000-02-29T00:00:00.999Z", "never rounds up into the next second")
    }

    func testEveryEventCarriesItsTime() throws {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("log-\(UUID().uuidString).jsonl")
        defer { try? FileManager.default.removeItem(at: url) }
        let before = Date().timeIntervalSince1970
        let log = try JSONLinesLog(url: url)
        log.write(event: "trainingBegin", [:])
        log.write(event: "epochEnd", ["loss": 1.5])
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let lines = try String(contentsOf: url, encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(lines.count, 2)
        var previous = before - 1
        for line in lines {
            let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let time = try XCTUnwrap(object["time"] as? String, String(line))
            let date = try XCTUnwrap(formatter.date(from: time), time).timeIntervalSince1970
            XCTAssertGreaterThanOrEqual(date, previous)
            XCTAssertLessThan(abs(date - before), 60)
            previous = date
        }
        XCTAssertTrue(lines[0].hasPrefix(#"{"event":"trainingBegin","time":""#), String(lines[0]))
    }
}
