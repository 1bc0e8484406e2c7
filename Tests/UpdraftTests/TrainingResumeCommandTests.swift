import Foundation
import XCTest
@testable import UpdraftModel
@testable import UpdraftTraining

/// `updraft train` killed with SIGKILL mid-run and continued with `--resume` ends with the model of
/// a run never interrupted, byte for byte, on the CPU backend and on OpenCL (PoCL).
final class TrainingResumeCommandTests: FolderTestCase {
    static let digits = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Data/digits/train", isDirectory: true)



    /// 8x8 grayscale digits: a frozen 3x3 convolution (so the feature cache is in play), then a 1x1
    /// convolution and a dense head that train with SGD and momentum; 3 epochs, shuffled.
    func model() throws -> URL {
        let image = ImageFeatureType(width: 8, height: 8, colorSpace: .grayscale)
        var b = try ModelBuilder(input: FeatureDescription(name: "image", type: .image(image)), seed: 21)
        b.setImageScaler(ImageScaler(channelScale: 1 / 255))
        try b.convolution("conv1", outputChannels: 8, kernel: (3, 3))
        try b.activation("relu1", .relu)
        try b.convolution("conv2", outputChannels: 10, kernel: (1, 1))
        try b.activation("relu2", .relu)
        try b.globalPoolClassifierHead(pool: "pool", dense: "fc", labels: .numbered(10))
        try b.makeUpdatable(["conv2", "fc"])
        try b.setCrossEntropyLoss(input: "probabilities")
        b.setOptimizer(.sgd(learningRate: 0.05, miniBatchSize: 8, momentum: 0.9))
        b.setEpochs(3)
        b.setShuffle(true, seed: 3)
        let url = folder.appendingPathComponent("digits.mlmodel")
        try b.build().write(to: url)
        return url
    }

    /// Four images of each digit: 40 examples, 5 mini-batches of 8 per epoch, 15 steps in all.
    func data() throws -> URL {
        let root = folder.appendingPathComponent("train")
        for digit in 0..<10 {
            let from = Self.digits.appendingPathComponent("\(digit)"), to = root.appendingPathComponent("\(digit)")
            try FileManager.default.createDirectory(at: to, withIntermediateDirectories: true)
            for name in try FileManager.default.contentsOfDirectory(atPath: from.path).sorted().prefix(4) {
                try FileManager.default.copyItem(at: from.appendingPathComponent(name), to: to.appendingPathComponent(name))
            }
        }
        return root
    }

    func assertKilledRunsResumeExactly(_ device: [String], file: StaticString = #filePath, line: UInt = #line) throws {
        let model = try model(), train = try data()
        let cache = folder.appendingPathComponent("cache")
        let full = folder.appendingPathComponent("full.mlmodel"), run = folder.appendingPathComponent("run.mlmodel")
        let uninterrupted = try runUpdraft(["train", model.path, "--train", train.path, "--out", full.path] + device,
                                           cacheDirectory: cache, file: file, line: line)
        XCTAssertEqual(uninterrupted.status, 0, uninterrupted.stderr, file: file, line: line)

        // Killed after step 7 of 15 (in epoch 2): the checkpoint after step 4 is on disk.
        let pause = "UPDRAFT_PAUSE_AFTER_MINI_BATCH"
        _ = try killUpdraft(when: "paused after mini-batch", ["train", model.path, "--train", train.path, "--out", run.path,
                                                              "--checkpoint-every-batches", "4"] + device,
                            cacheDirectory: cache, environment: [pause: "7"], file: file, line: line)
        XCTAssertEqual(try TrainingCheckpoint.read(forModel: run).position.steps, 4, file: file, line: line)
        XCTAssertNoThrow(try CoreMLModel(contentsOf: run), "the checkpoint is a Core ML model", file: file, line: line)

        // Resumed, and killed again after 5 more (step 9 of 15): the checkpoint after step 8 stands.
        _ = try killUpdraft(when: "paused after mini-batch", ["train", "--resume", run.path, "--train", train.path] + device,
                            cacheDirectory: cache, environment: [pause: "5"], file: file, line: line)
        XCTAssertEqual(try TrainingCheckpoint.read(forModel: run).position.steps, 8, file: file, line: line)

        let resumed = try runUpdraft(["train", "--resume", run.path, "--train", train.path] + device, cacheDirectory: cache,
                                     file: file, line: line)
        XCTAssertEqual(resumed.status, 0, resumed.stderr, file: file, line: line)
        XCTAssertTrue(resumed.stdout.contains("resuming run.mlmodel at epoch 2, after mini-batch 3 (step 8) of 3 epochs"),
                      resumed.stdout, file: file, line: line)
        XCTAssertEqual(try Data(contentsOf: run), try Data(contentsOf: full),
                       "the resumed model is the uninterrupted run's, byte for byte", file: file, line: line)
        XCTAssertFalse(FileManager.default.fileExists(atPath: TrainingCheckpoint.url(forModel: run).path),
                       "a completed run leaves no resume state behind", file: file, line: line)
        let history = try TrainingHistory.read(from: TrainingHistory.url(forModel: run))
        let expected = try TrainingHistory.read(from: TrainingHistory.url(forModel: full))
        XCTAssertEqual(history.epochs.map(\.miniBatchLosses), expected.epochs.map(\.miniBatchLosses), file: file, line: line)
        XCTAssertEqual(history.epochs.map(\.meanLoss), expected.epochs.map(\.meanLoss), file: file, line: line)
    }

    func testKilledRunResumesBitIdenticallyOnTheCPU() throws {
        try assertKilledRunsResumeExactly(["--compute-units", "cpuOnly"])
    }

    func testKilledRunResumesBitIdenticallyOnOpenCL() throws {
        _ = try OpenCLTestSupport.context()
        try assertKilledRunsResumeExactly(["--device", "0"])
    }

    /// What the command refuses: a run that would change the checkpoint's shape, other data, and a
    /// model without a resume state.
    func testResumeRefusalsNameTheWayOut() throws {
        let model = try model(), train = try data()
        let cache = folder.appendingPathComponent("cache"), run = folder.appendingPathComponent("run.mlmodel")
        _ = try killUpdraft(when: "paused after mini-batch", ["train", model.path, "--train", train.path, "--out", run.path,
                                                              "--checkpoint-every-batches", "2", "--compute-units", "cpuOnly"],
                            cacheDirectory: cache, environment: ["UPDRAFT_PAUSE_AFTER_MINI_BATCH": "3"])
        let epochs = try runUpdraft(["train", "--resume", run.path, "--train", train.path, "--epochs", "5"], cacheDirectory: cache)
        XCTAssertNotEqual(epochs.status, 0)
        XCTAssertTrue(epochs.stderr.contains("epochs is 3 in the checkpoint; a resumed run cannot change it"), epochs.stderr)
        try FileManager.default.removeItem(at: train.appendingPathComponent("9"))
        let fewer = try runUpdraft(["train", "--resume", run.path, "--train", train.path], cacheDirectory: cache)
        XCTAssertNotEqual(fewer.status, 0)
        XCTAssertTrue(fewer.stderr.contains("the training data is not the checkpoint's: it has 36 examples"), fewer.stderr)
        let none = try runUpdraft(["train", "--resume", model.path, "--train", train.path], cacheDirectory: cache)
        XCTAssertNotEqual(none.status, 0)
        XCTAssertTrue(none.stderr.contains("digits.mlmodel has no resume state"), none.stderr)
    }
}
