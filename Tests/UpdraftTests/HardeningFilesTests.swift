import XCTest
@testable import UpdraftCore
@testable import UpdraftModel
@testable import UpdraftPlacement
@testable import UpdraftData
@testable import UpdraftTraining

/// Issue 13, findings 2, 3 and 8: the log appends and never replaces what is not a regular file
/// (or the input model); a log that cannot be written is one warning; outputs are checked before
/// training; a failed checkpoint is a warning; writes leave no temporary file behind; SIGTERM and
/// SIGHUP save the model like Ctrl-C.
final class HardeningFilesTests: FolderTestCase {
    func testLogAppendsAndRefusesWhatIsNotARegularFile() throws {
        let url = folder.appendingPathComponent("run.jsonl")
        try Data("{\"event\":\"earlier\"}\n".utf8).write(to: url)
        try JSONLinesLog(url: url).write(event: "later", [:])
        let text = try String(contentsOf: url, encoding: .utf8)
            .replacingOccurrences(of: #","time":"[^"]*""#, with: "", options: .regularExpression)
        XCTAssertEqual(text, "{\"event\":\"earlier\"}\n{\"event\":\"later\"}\n")

        let fifo = folder.appendingPathComponent("fifo.jsonl")
        XCTAssertEqual(mkfifo(fifo.path, 0o644), 0)
        for (path, kind) in [("/dev/full", "a character device"), (fifo.path, "a FIFO"), (folder.path, "a folder")] {
            XCTAssertThrowsError(try JSONLinesLog(url: URL(fileURLWithPath: path))) { e in
                XCTAssertTrue("\(e)".contains("is \(kind), not a regular file"), "\(e)")
            }
        }
        var st = stat()
        XCTAssertEqual(stat("/dev/full", &st), 0)
        XCTAssertEqual(st.st_mode & S_IFMT, S_IFCHR, "/dev/full is still a device")

        let model = folder.appendingPathComponent("in.mlmodel")
        try Data([1, 2, 3]).write(to: model)
        XCTAssertThrowsError(try JSONLinesLog(url: model, notTheSameAs: [model])) { e in
            XCTAssertTrue("\(e)".contains("is the same file as"), "\(e)")
        }
        let link = folder.appendingPathComponent("link.jsonl")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: model)
        XCTAssertThrowsError(try JSONLinesLog(url: link, notTheSameAs: [model]))
        XCTAssertEqual(try Data(contentsOf: model), Data([1, 2, 3]), "the model is untouched")
    }

    /// A full disk: the write fails (ENOSPC on /dev/full); one warning, no crash, nothing more written.
    func testLogWriteFailureIsOneWarning() throws {
        let fd = open("/dev/full", O_WRONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        let log = JSONLinesLog(fileDescriptor: fd, url: URL(fileURLWithPath: "/dev/full"))
        var warnings: [String] = []
        log.onWriteFailure = { warnings.append($0) }
        for i in 0..<5 { log.write(event: "miniBatchEnd", ["batch": i]) }
        XCTAssertEqual(warnings.count, 1)
        XCTAssertTrue(warnings[0].contains("No space left on device") && warnings[0].contains("training goes on"), "\(warnings)")
    }

    /// A write that fails part-way (here: past the file size limit, as on a full disk) removes its
    /// temporary file and leaves the old file as it was.
    func testFailedWriteLeavesNoTemporaryFile() throws {
        let url = folder.appendingPathComponent("model.mlmodel")
        try writeAtomically(Data("old".utf8), to: url)
        signal(SIGXFSZ, SIG_IGN)
        var saved = rlimit()
        getrlimit(Int32(RLIMIT_FSIZE.rawValue), &saved)
        var limited = saved
        limited.rlim_cur = 4096
        setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limited)
        XCTAssertThrowsError(try writeAtomically(Data(count: 100_000), to: url)) { e in
            XCTAssertTrue("\(e)".contains("cannot write \(url.path)"), "\(e)")
        }
        setrlimit(Int32(RLIMIT_FSIZE.rawValue), &saved)
        signal(SIGXFSZ, SIG_DFL)
        XCTAssertEqual(try String(contentsOf: url, encoding: .utf8), "old")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder.path), ["model.mlmodel"])
        // A folder that does not exist: an error naming it, nothing created.
        XCTAssertThrowsError(try writeAtomically(Data("x".utf8), to: folder.appendingPathComponent("missing/m.mlmodel")))
    }

    func testFailedCheckpointIsAWarning() throws {
        let (g, model) = try GoldenRun.load("branches_sgd")
        var config = UpdateConfiguration()
        config.checkpoints.everyEpochs = 1
        config.checkpoints.url = folder.appendingPathComponent("no-such-folder/checkpoint.mlmodel")
        let task = UpdateTask(model: model, trainingData: try ArrayBatchProvider(examples: g.examples), configuration: config)
        XCTAssertEqual(task.run().task.state, .completed)
        XCTAssertEqual(task.warnings.filter { $0.contains("cannot write the checkpoint") }.count, task.history.epochs.count,
                       "\(task.warnings)")
    }

    // MARK: The command line

    func imageData() throws -> URL {
        let data = folder.appendingPathComponent("data")
        for (label, base) in [("no", 30), ("yes", 200)] {
            let dir = data.appendingPathComponent(label)
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            for i in 0..<4 {
                let png = try ImageEncoder.png(width: 16, height: 16, colorType: .rgb,
                                               samples: [UInt8](repeating: UInt8(base + i), count: 768))
                XCTAssertTrue(FileManager.default.createFile(atPath: dir.appendingPathComponent("\(i).png").path, contents: Data(png)))
            }
        }
        return data
    }

    func testCommandChecksOutputsBeforeTrainingAndNeverOverwritesTheModel() throws {
        let model = folder.appendingPathComponent("in.mlmodel")
        try FileManager.default.copyItem(at: Fixtures.url("conv_image_classifier.mlmodel"), to: model)
        let before = try Data(contentsOf: model)
        let data = try imageData()
        let cache = folder.appendingPathComponent("cache")
        let base = ["train", model.path, "--train", data.path, "--epochs", "1", "--batch-size", "4", "--compute-units", "cpuOnly"]

        let missing = try runUpdraft(base + ["--out", folder.appendingPathComponent("nope/out.mlmodel").path], cacheDirectory: cache)
        XCTAssertEqual(missing.status, 1)
        XCTAssertTrue(missing.stderr.contains("the folder of --out") && missing.stderr.contains("does not exist"), missing.stderr)
        XCTAssertFalse(missing.stdout.contains("training data:"), "checked before the data is read: \(missing.stdout)")

        let logIsModel = try runUpdraft(base + ["--out", folder.appendingPathComponent("o.mlmodel").path, "--log", model.path],
                                        cacheDirectory: cache)
        XCTAssertEqual(logIsModel.status, 1)
        XCTAssertTrue(logIsModel.stderr.contains("is the same file as"), logIsModel.stderr)
        XCTAssertEqual(try Data(contentsOf: model), before, "the input model is untouched")

        let logIsDevice = try runUpdraft(base + ["--out", folder.appendingPathComponent("o.mlmodel").path, "--log", "/dev/full"],
                                         cacheDirectory: cache)
        XCTAssertEqual(logIsDevice.status, 1)
        XCTAssertTrue(logIsDevice.stderr.contains("not a regular file"), logIsDevice.stderr)
    }

    /// SIGTERM (docker stop, Kubernetes) and SIGHUP stop after the current mini-batch and save the
    /// model, its history and the completion event, like Ctrl-C.
    func testTerminationSignalsSaveTheModel() throws {
        let model = folder.appendingPathComponent("long.mlmodel")
        try HardeningSizeTests.imageModel(batch: 4, epochs: 100_000).write(to: model)
        let data = try imageData()
        let candidates = [Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent()].map { $0.appendingPathComponent("updraft") }
        guard let binary = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
            throw XCTSkip("no updraft binary next to the tests")
        }
        for (signalNumber, name) in [(SIGTERM, "SIGTERM"), (SIGHUP, "SIGHUP")] {
            let out = folder.appendingPathComponent("\(name).mlmodel"), log = folder.appendingPathComponent("\(name).jsonl")
            let process = Process()
            process.executableURL = binary
            process.arguments = ["train", model.path, "--train", data.path, "--epochs", "100000", "--batch-size", "4",
                                 "--compute-units", "cpuOnly", "--no-feature-cache", "--out", out.path, "--log", log.path]
            var env = ProcessInfo.processInfo.environment
            env[CalibrationCache.directoryVariable] = folder.appendingPathComponent("cache").path
            process.environment = env
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            // Wait for training to be under way (mini-batch events in the log), then signal.
            let deadline = Date().addingTimeInterval(60)
            while Date() < deadline {
                if let text = try? String(contentsOf: log, encoding: .utf8), text.components(separatedBy: "miniBatchEnd").count > 3 { break }
                usleep(50_000)
            }
            kill(process.processIdentifier, signalNumber)
            process.waitUntilExit()
            XCTAssertEqual(process.terminationReason, .exit, name)
            XCTAssertEqual(process.terminationStatus, 128 + signalNumber, name)
            XCTAssertNoThrow(try CoreMLModel(contentsOf: out), name)
            XCTAssertNoThrow(try TrainingHistory.read(from: TrainingHistory.url(forModel: out)), name)
            let lines = try String(contentsOf: log, encoding: .utf8).split(separator: "\n")
            XCTAssertTrue(lines.last?.contains(#""event":"completion""#) == true && lines.last?.contains("cancelled") == true,
                          "\(name): \(lines.last ?? "")")
        }
    }
}
