import Foundation
import XCTest
@testable import Updraft

/// Checkpoints written by an earlier Updraft (Fixtures/resume-b3627f1: SGD with momentum, and Adam,
/// from before optimizer state was declared by the optimizer types) resume with this version and end
/// with the model the earlier version trained uninterrupted, byte for byte.
extension TrainingResumeCommandTests {
    static let compatibilityFixtures = Fixtures.url("resume-b3627f1")
    static let validationDigits = Fixtures.repositoryRoot.appendingPathComponent("Tests/Data/digits/validation", isDirectory: true)

    /// The data the checkpoints were trained on: digits 0 as `no`, 1 as `yes`, each image and 20 copies.
    func compatibilityData() throws -> URL {
        let root = folder.appendingPathComponent("data")
        for (label, digit) in [("no", 0), ("yes", 1)] {
            let from = Self.validationDigits.appendingPathComponent("\(digit)"), to = root.appendingPathComponent(label)
            try FileManager.default.createDirectory(at: to, withIntermediateDirectories: true)
            for name in try FileManager.default.contentsOfDirectory(atPath: from.path) {
                let source = from.appendingPathComponent(name)
                try FileManager.default.copyItem(at: source, to: to.appendingPathComponent(name))
                for i in 1...20 { try FileManager.default.copyItem(at: source, to: to.appendingPathComponent("c\(i)_\(name)")) }
            }
        }
        return root
    }

    func assertOldCheckpointResumesExactly(_ name: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let train = try compatibilityData()
        for suffix in ["mlmodel", "resume"] {
            try FileManager.default.copyItem(at: Self.compatibilityFixtures.appendingPathComponent("\(name)_cut.\(suffix)"),
                                             to: folder.appendingPathComponent("\(name)_cut.\(suffix)"))
        }
        let out = folder.appendingPathComponent("\(name)_resumed.mlmodel")
        let run = try runUpdraft(["train", "--resume", folder.appendingPathComponent("\(name)_cut.mlmodel").path,
                                  "--train", train.path, "--compute-units", "cpuOnly", "--out", out.path],
                                 cacheDirectory: folder.appendingPathComponent("cache"), file: file, line: line)
        XCTAssertEqual(run.status, 0, run.stderr, file: file, line: line)
        let expected = try Data(contentsOf: Self.compatibilityFixtures.appendingPathComponent("\(name)_full.mlmodel"))
        XCTAssertEqual(try Data(contentsOf: out), expected, "\(name): the resumed run differs from b3627f1's uninterrupted one",
                       file: file, line: line)
    }

    func testSGDWithMomentumCheckpointFromB3627f1ResumesExactly() throws { try assertOldCheckpointResumesExactly("sgd") }

    func testAdamCheckpointFromB3627f1ResumesExactly() throws { try assertOldCheckpointResumesExactly("adam") }
}
