import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftModel
@testable import UpdraftData
@testable import UpdraftTraining

/// One event as the tests read it back from an event file.
struct LoggedEvent {
    var step: Int64
    var fileVersion: String?
    var sessionLogStatus: UInt64?
    /// Each summary value: tag, simple_value, histogram count (`num`), plugin name.
    var values: [(tag: String, scalar: Float?, histogramCount: Double?, plugin: String?)] = []
}

/// Reads an event file as TensorBoard does: every record's framing and masked CRC-32Cs checked,
/// then each `Event` parsed. A record cut short at the end (a killed run, a full disk) ends the file.
func readEventFile(_ url: URL, file: StaticString = #filePath, line: UInt = #line) throws -> [LoggedEvent] {
    let bytes = [UInt8](try Data(contentsOf: url))
    var events: [LoggedEvent] = [], offset = 0
    func le<T: FixedWidthInteger>(_ at: Int, _: T.Type) -> T {
        (0..<MemoryLayout<T>.size).reduce(T(0)) { $0 | T(bytes[at + $1]) << (8 * $1) }
    }
    while offset + 12 <= bytes.count {
        let length = Int(le(offset, UInt64.self))
        XCTAssertEqual(le(offset + 8, UInt32.self), CRC32C.maskedChecksum(bytes[offset..<offset + 8]), "length CRC at \(offset)", file: file, line: line)
        guard offset + 16 + length <= bytes.count else { break }
        let data = bytes[offset + 12..<offset + 12 + length]
        XCTAssertEqual(le(offset + 12 + length, UInt32.self), CRC32C.maskedChecksum(data), "data CRC at \(offset)", file: file, line: line)
        let event = try ProtoReader(parsing: data, typeName: "Event")
        var e = LoggedEvent(step: try event.int64(2, "step") ?? 0)
        e.fileVersion = try event.string(3, "file_version")
        e.sessionLogStatus = try event.message(7, "session_log").flatMap { try $0.uint64(1, "status") }
        for value in try event.message(5, "summary")?.messages(1, "value") ?? [] {
            e.values.append((try value.string(1, "tag") ?? "", try value.float(2, "simple_value"),
                             try value.message(5, "histo").flatMap { try $0.double(3, "num") },
                             try value.message(9, "metadata")?.message(1, "plugin_data").flatMap { try $0.string(1, "plugin_name") }))
        }
        events.append(e)
        offset += 16 + length
    }
    return events
}

final class ReportingTensorBoardTests: FolderTestCase {
    /// RFC 3720 (iSCSI) B.4's CRC-32C vectors and the common check value; the masks as TensorBoard's
    /// own `masked_crc32c` computes them.
    func testCRC32CMatchesPublishedVectors() {
        XCTAssertEqual(CRC32C.checksum(Array("123456789".utf8)), 0xE306_9283)
        XCTAssertEqual(CRC32C.checksum([UInt8]()), 0)
        XCTAssertEqual(CRC32C.checksum([UInt8](repeating: 0, count: 32)), 0x8A91_36AA)
        XCTAssertEqual(CRC32C.checksum([UInt8](repeating: 0xFF, count: 32)), 0x62A8_AB43)
        XCTAssertEqual(CRC32C.checksum((0..<32).map { UInt8($0) }), 0x46DD_794E)
        XCTAssertEqual(CRC32C.checksum((0..<32).reversed().map { UInt8($0) }), 0x113F_DB5C)
        XCTAssertEqual(CRC32C.maskedChecksum(Array("123456789".utf8)), 0xC78A_B0E5)
        XCTAssertEqual(CRC32C.maskedChecksum([UInt8]()), 0xA282_EAD8)
    }

    /// A record framed byte for byte as TensorBoard's own `RecordWriter` frames `b"Updraft"`.
    func testRecordFramingMatchesTensorBoardsWriter() {
        let framed = TensorBoardWriter.frame(Array("Updraft".utf8))
        XCTAssertEqual(framed.map { String(format: "%02x", $0) }.joined(), "0700000000000000bbd79f115570647261667459ae7c6e")
    }

    /// A run logs, from the first record on: file_version, the hyperparameters, every mini-batch's
    /// loss at steps 1, 2, ..., and at each epoch's last step its figures and every updatable
    /// layer's histograms; the hparams session ends with success.
    func testTrainingRunLogsEveryMiniBatchAndEpoch() throws {
        let (g, model) = try GoldenRun.load("branches_sgd")
        var config = UpdateConfiguration()
        config.reporting.tensorboardDirectory = folder.appendingPathComponent("runs/tb")   // made, with its parent
        let task = UpdateTask(model: model, trainingData: try ArrayBatchProvider(examples: g.examples), configuration: config)
        XCTAssertEqual(task.run().task.state, .completed)
        let files = try FileManager.default.contentsOfDirectory(atPath: config.reporting.tensorboardDirectory!.path)
        XCTAssertEqual(files.count, 1)
        XCTAssertTrue(files[0].hasPrefix("events.out.tfevents."), files[0])
        let events = try readEventFile(config.reporting.tensorboardDirectory!.appendingPathComponent(files[0]))
        XCTAssertEqual(events.first?.fileVersion, "brain.Event:2")
        let tags = Set(events.flatMap { $0.values.map(\.tag) })
        XCTAssertTrue(tags.isSuperset(of: ["hyperparameters", "updatable_layers", "_hparams_/session_start_info", "_hparams_/session_end_info"]), "\(tags)")

        let losses = task.history.epochs.flatMap { $0.miniBatchLosses ?? [] }
        let perEpoch = losses.count / task.history.epochs.count
        XCTAssertGreaterThan(task.history.epochs.count, 1)
        let batchLoss = events.flatMap { e in e.values.filter { $0.tag == "batch/loss" }.map { (e.step, $0.scalar!) } }
        XCTAssertEqual(batchLoss.map(\.0), (1...losses.count).map(Int64.init))
        XCTAssertEqual(batchLoss.map(\.1), losses.map { Float($0) })
        let graph = try NetworkGraph(model: model)
        for (e, metrics) in task.history.epochs.enumerated() {
            let step = Int64((e + 1) * perEpoch)
            let logged = events.filter { $0.step == step }.flatMap(\.values)
            XCTAssertEqual(logged.first { $0.tag == "train/loss" }?.scalar, Float(metrics.meanLoss!))
            XCTAssertEqual(logged.first { $0.tag == "learning_rate" }?.scalar, Float(Double(task.history.parameters["learningRate"]!)!))
            for layer in graph.updatableLayers {
                XCTAssertEqual(logged.first { $0.tag == "weights/\(layer.name)" }?.histogramCount, Double(layer.weights!.count))
                XCTAssertEqual(logged.first { $0.tag == "gradients/\(layer.name)" }?.histogramCount, Double(layer.weights!.count))
            }
        }
        XCTAssertNil(events.first { $0.sessionLogStatus != nil }, "a fresh run logs no SessionLog")
    }

    /// With a TensorBoard log and validation data, each epoch's validation counts a confusion matrix
    /// whose diagonal is the validation accuracy the kernels counted, over every example; the
    /// matrix is logged as a PNG image at the epoch's step.
    func testValidationConfusionMatrixAgreesWithTheAccuracy() throws {
        let (g, model) = try GoldenRun.load("branches_sgd")
        var config = UpdateConfiguration()
        config.reporting.tensorboardDirectory = folder.appendingPathComponent("tb")
        config.data.validationData = try ArrayBatchProvider(examples: Array(g.examples.reversed()))
        let seen = Locked<[([[Int]], Double)]>([])
        let task = UpdateTask(model: model, trainingData: try ArrayBatchProvider(examples: g.examples), configuration: config,
                              handlers: UpdateHandlers(events: .epochEnd, progress: { ctx in
                                  let matrix = ctx.task.session?.validationConfusion ?? []
                                  seen.mutate { $0.append((matrix, ctx.metrics?.validationAccuracy ?? -1)) }
                              }))
        XCTAssertEqual(task.run().task.state, .completed)
        let epochs = seen.value
        XCTAssertEqual(epochs.count, task.history.epochs.count)
        for (matrix, accuracy) in epochs {
            XCTAssertGreaterThan(matrix.count, 1)
            XCTAssertEqual(matrix.flatMap { $0 }.reduce(0, +), g.examples.count, "every validation example counted once")
            for t in 0..<matrix.count { XCTAssertEqual(matrix[t].reduce(0, +), g.labels.filter { $0 == t }.count, "class \(t)'s examples") }
            let diagonal = (0..<matrix.count).reduce(0) { $0 + matrix[$1][$1] }
            XCTAssertEqual(Double(diagonal) / Double(g.examples.count), accuracy, accuracy: 1e-12)
        }
        let file = try FileManager.default.contentsOfDirectory(at: config.reporting.tensorboardDirectory!, includingPropertiesForKeys: nil)[0]
        let images = try readEventFile(file).filter { $0.values.contains { $0.tag == "validation/confusion_matrix" } }
        XCTAssertEqual(images.count, epochs.count)
    }

    /// A run stopped after step 3 with its last checkpoint at step 2, resumed: the resumed run's
    /// file starts with a SessionLog START at step 3 (TensorBoard drops the earlier file's step 3
    /// on reading it), and its steps go on from there to the end, each once.
    func testResumedRunStartsWithASessionLogAtItsFirstStep() throws {
        let (g, model) = try GoldenRun.load("branches_sgd")
        let dir = folder.appendingPathComponent("tb"), checkpoint = folder.appendingPathComponent("run.mlmodel")
        var config = UpdateConfiguration()
        config.reporting.tensorboardDirectory = dir
        config.checkpoints.everyMiniBatches = 2
        config.checkpoints.url = checkpoint
        let steps = Locked(0)
        let first = UpdateTask(model: model, trainingData: try ArrayBatchProvider(examples: g.examples), configuration: config,
                               handlers: UpdateHandlers(events: .miniBatchEnd, progress: { ctx in
                                   if steps.mutate({ $0 += 1; return $0 }) == 3 { ctx.task.cancel() }
                               }))
        XCTAssertEqual(first.run().task.state, .cancelled)
        XCTAssertEqual(try TrainingCheckpoint.read(forModel: checkpoint).position.steps, 2)
        var resumedConfig = UpdateConfiguration()
        resumedConfig.reporting.tensorboardDirectory = dir
        let resumed = try UpdateTask(resumingFrom: checkpoint, trainingData: try ArrayBatchProvider(examples: g.examples), configuration: resumedConfig)
        XCTAssertEqual(resumed.run().task.state, .completed)
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).sorted()
        XCTAssertEqual(files.count, 2, "\(files)")
        let before = try readEventFile(dir.appendingPathComponent(files[0])), after = try readEventFile(dir.appendingPathComponent(files[1]))
        func lossSteps(_ events: [LoggedEvent]) -> [Int64] { events.filter { $0.values.contains { $0.tag == "batch/loss" } }.map(\.step) }
        XCTAssertEqual(lossSteps(before), [1, 2, 3])
        XCTAssertEqual(after.first?.fileVersion, "brain.Event:2")
        XCTAssertEqual(after.dropFirst().first?.sessionLogStatus, 1, "START")
        XCTAssertEqual(after.dropFirst().first?.step, 3)
        let total = resumed.history.epochs.reduce(0) { $0 + ($1.miniBatchLosses?.count ?? 0) }
        XCTAssertEqual(lossSteps(after), (3...Int64(total)).map { $0 })
    }

    /// A folder that is a file, or that cannot be made: the task fails before its first mini-batch, naming it.
    /// A k-NN update logs samples, not losses: the count after each batch, and per label at the end;
    /// a pipeline whose last model is a network logs as a network does.
    func testAKNearestNeighborsUpdateLogsSamplesAndAPipelineLogsItsNetwork() throws {
        let knn = try CoreMLModel(contentsOf: Fixtures.url("knn/update_strings.mlmodel"))
        let data = try ModelDataset(model: knn, path: Fixtures.url("knn/update_strings_train")).provider
        var config = UpdateConfiguration()
        config.reporting.tensorboardDirectory = folder.appendingPathComponent("knn")
        config.parameters[.miniBatchSize] = .int(8)
        let task = UpdateTask(model: knn, trainingData: data, configuration: config)
        XCTAssertEqual(task.run().task.state, .completed)
        let file = try XCTUnwrap(try FileManager.default.contentsOfDirectory(at: folder.appendingPathComponent("knn"), includingPropertiesForKeys: nil).first)
        let events = try readEventFile(file)
        let stored = try XCTUnwrap(try task.currentModel().kNearestNeighbors)
        let counts = events.flatMap { e in e.values.filter { $0.tag == "knn/samples" }.map { (e.step, $0.scalar!) } }
        let before = try XCTUnwrap(knn.kNearestNeighbors).samples.count
        XCTAssertEqual(counts.map(\.0), stride(from: 8, through: data.count, by: 8).map(Int64.init) + (data.count % 8 == 0 ? [] : [Int64(data.count)]))
        XCTAssertEqual(counts.last.map { Int($0.1) }, stored.samples.count)
        XCTAssertEqual(counts.first.map { Int($0.1) }, before + 8)
        let perLabel = Dictionary(uniqueKeysWithValues: events.flatMap { $0.values }.filter { $0.tag.hasPrefix("knn/samples_per_label/") }
            .map { (String($0.tag.dropFirst("knn/samples_per_label/".count)), Int($0.scalar!)) })
        XCTAssertEqual(perLabel, Dictionary(uniqueKeysWithValues: stored.samplesPerLabel.map { ($0.label, $0.count) }))
        XCTAssertFalse(events.contains { $0.values.contains { $0.tag == "batch/loss" } }, "a k-NN has no loss to log")

        let pipeline = try CoreMLModel(contentsOf: Fixtures.url("pipeline/network_last.mlmodel"))
        var p = UpdateConfiguration()
        p.reporting.tensorboardDirectory = folder.appendingPathComponent("pipeline")
        p.placement.computeUnits = .cpuOnly
        let run = UpdateTask(model: pipeline, trainingData: try ModelDataset(model: pipeline, path: Fixtures.url("pipeline/data")).provider, configuration: p)
        XCTAssertEqual(run.run().task.state, .completed)
        let logged = try readEventFile(try XCTUnwrap(try FileManager.default.contentsOfDirectory(at: folder.appendingPathComponent("pipeline"), includingPropertiesForKeys: nil).first))
        XCTAssertEqual(logged.filter { $0.values.contains { $0.tag == "batch/loss" } }.count, 12)
        XCTAssertTrue(logged.contains { $0.values.contains { $0.tag == "weights/fc" } })
    }

    func testFolderThatIsAFileOrCannotBeMadeFailsBeforeTraining() throws {
        let (g, model) = try GoldenRun.load("branches_sgd")
        let file = folder.appendingPathComponent("tb")
        try Data("x".utf8).write(to: file)
        for (dir, words) in [(file, "is a regular file, not a folder"), (file.appendingPathComponent("sub"), "cannot make the TensorBoard folder")] {
            var config = UpdateConfiguration()
            config.reporting.tensorboardDirectory = dir
            let task = UpdateTask(model: model, trainingData: try ArrayBatchProvider(examples: g.examples), configuration: config)
            let final = task.run()
            XCTAssertEqual(final.task.state, .failed)
            XCTAssertTrue("\(final.error!)".contains(words) && "\(final.error!)".contains(dir.path), "\(final.error!)")
            XCTAssertTrue(task.history.epochs.isEmpty, "nothing trained")
        }
        XCTAssertEqual(try String(contentsOf: file, encoding: .utf8), "x", "the file is untouched")
    }

    /// A full disk (ENOSPC on /dev/full): one warning, nothing more written, no crash.
    func testWriteFailureIsOneWarning() throws {
        let fd = open("/dev/full", O_WRONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        let writer = TensorBoardWriter(fileDescriptor: fd, url: URL(fileURLWithPath: "/dev/full"))
        var warnings: [String] = []
        writer.onWriteFailure = { warnings.append($0) }
        for step in 1...5 { writer.write(record: TensorBoardEvent.summary(wallTime: 0, step: Int64(step), [TensorBoardEvent.scalar("x", 1)])) }
        writer.flush()
        XCTAssertTrue(writer.hasFailed)
        XCTAssertEqual(warnings.count, 1)
        XCTAssertTrue(warnings[0].contains("No space left on device") && warnings[0].contains("training goes on"), "\(warnings)")
    }

    /// The event file fills the disk mid-run (a file-size limit): a warning, training completes, the
    /// model is written, and what the file holds still reads.
    func testDiskFillingMidRunIsAWarningAndTheModelIsKept() throws {
        let (g, model) = try GoldenRun.load("branches_sgd")
        var config = UpdateConfiguration()
        config.reporting.tensorboardDirectory = folder.appendingPathComponent("tb")
        let task = UpdateTask(model: model, trainingData: try ArrayBatchProvider(examples: g.examples), configuration: config)
        signal(SIGXFSZ, SIG_IGN)
        var saved = rlimit()
        getrlimit(Int32(RLIMIT_FSIZE.rawValue), &saved)
        var limited = saved
        limited.rlim_cur = 1500
        setrlimit(Int32(RLIMIT_FSIZE.rawValue), &limited)
        let state = task.run().task.state
        setrlimit(Int32(RLIMIT_FSIZE.rawValue), &saved)
        signal(SIGXFSZ, SIG_DFL)
        XCTAssertEqual(state, .completed)
        XCTAssertEqual(task.warnings.filter { $0.contains("cannot write the TensorBoard event file") }.count, 1, "\(task.warnings)")
        let out = folder.appendingPathComponent("out.mlmodel")
        try task.write(to: out)
        XCTAssertEqual(try CoreMLModel(contentsOf: out).weights(ofLayer: NetworkGraph(model: model).updatableLayers[0].name).data,
                       try task.weights(ofLayer: NetworkGraph(model: model).updatableLayers[0].name).weights.data)
        let file = try FileManager.default.contentsOfDirectory(at: config.reporting.tensorboardDirectory!, includingPropertiesForKeys: nil)[0]
        let events = try readEventFile(file)
        XCTAssertEqual(events.first?.fileVersion, "brain.Event:2")
        XCTAssertLessThanOrEqual(try Data(contentsOf: file).count, 1500)
    }
}

extension HardeningFilesTests {
    /// `train --tensorboard` naming a file: refused before the data is read, no model written.
    func testCommandRefusesATensorBoardFolderThatIsAFile() throws {
        let model = folder.appendingPathComponent("in.mlmodel")
        try FileManager.default.copyItem(at: Fixtures.url("conv_image_classifier.mlmodel"), to: model)
        let data = try imageData()
        let file = folder.appendingPathComponent("tb")
        try Data("x".utf8).write(to: file)
        let out = folder.appendingPathComponent("o.mlmodel")
        let run = try runUpdraft(["train", model.path, "--train", data.path, "--epochs", "1", "--batch-size", "4", "--compute-units", "cpuOnly",
                                  "--out", out.path, "--tensorboard", file.path], cacheDirectory: folder.appendingPathComponent("cache"))
        XCTAssertEqual(run.status, 1)
        XCTAssertTrue(run.stderr.contains("the TensorBoard folder \(file.path) is a regular file, not a folder"), run.stderr)
        XCTAssertFalse(run.stdout.contains("training data:"), "checked before the data is read: \(run.stdout)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: out.path))
    }
}
