import Foundation
import XCTest
@testable import Updraft

/// Checkpoints written by an earlier Updraft (Fixtures/resume-b3627f1: SGD with momentum, and Adam,
/// from before optimizer state was declared by the optimizer types) resume with this version and end
/// with the model the earlier version trained uninterrupted (within float rounding across hosts).
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
        // b3627f1's uninterrupted run was made on another host: OpenBLAS picks its kernels by CPU (AVX2
        // there, AVX-512 on some hosts), so the sums may round differently in the last bits. Byte for
        // byte on the host that made the fixtures; elsewhere within float rounding, far below what a
        // lost or misread optimizer state changes (momentum or Adam's moments move weights by ~1e-3).
        let expected = try CoreMLModel(contentsOf: Self.compatibilityFixtures.appendingPathComponent("\(name)_full.mlmodel"))
        let resumed = try CoreMLModel(contentsOf: out)
        XCTAssertEqual(resumed.layerNames, expected.layerNames, file: file, line: line)
        XCTAssertFalse(expected.updatableLayerNames.isEmpty, file: file, line: line)
        for layer in expected.updatableLayerNames {
            let a = try resumed.weights(ofLayer: layer).data + (try resumed.bias(ofLayer: layer)?.data ?? [])
            let b = try expected.weights(ofLayer: layer).data + (try expected.bias(ofLayer: layer)?.data ?? [])
            XCTAssertEqual(a.count, b.count, file: file, line: line)
            let worst = zip(a, b).map { abs($0 - $1) }.max() ?? 0
            XCTAssertLessThanOrEqual(worst, 2e-5, "\(name): layer \(layer) of the resumed run differs from b3627f1's uninterrupted one by \(worst)",
                                     file: file, line: line)
        }
    }

    func testSGDWithMomentumCheckpointFromB3627f1ResumesExactly() throws { try assertOldCheckpointResumesExactly("sgd") }

    func testAdamCheckpointFromB3627f1ResumesExactly() throws { try assertOldCheckpointResumesExactly("adam") }
}
