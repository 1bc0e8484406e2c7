import XCTest
@testable import UpdraftCore
@testable import UpdraftModel
@testable import UpdraftData
@testable import UpdraftTraining

/// The k-NN update (issue 23, item 4): one sample appended per example, through `UpdateTask` and
/// `updraft train`, checked against facts the update did not compute: the appended samples are the
/// input rows, the labels the label file's, and after the update the predictions are scikit-learn's
/// fitted on the concatenated samples (Tests/Scripts/make_knn_update_oracle.py).
final class KNearestNeighborsUpdateTests: FolderTestCase {
    struct Oracle: Decodable {
        var k: Int
        var labels: [String]
        var queries: [[Float]]
        var appended: Int
        var neighbors: [[Int]]
        var distances: [[Double]]
        var probabilities: [[Double]]
        var predicted: [String]
    }

    func fixture(_ name: String) throws -> (CoreMLModel, Oracle, URL) {
        let model = try CoreMLModel(contentsOf: Fixtures.url("knn/\(name).mlmodel"))
        let oracle = try JSONDecoder().decode(Oracle.self, from: Data(contentsOf: Fixtures.url("knn/\(name).json")))
        return (model, oracle, Fixtures.url("knn/\(name)_train"))
    }

    func rows(_ folder: URL) throws -> [[Float]] {
        let a = try NpyArray(contentsOf: folder.appendingPathComponent("inputs.npy"))
        guard case let .float(v) = a.values else { throw UpdraftError(.data, "float inputs expected") }
        return (0..<a.shape[0]).map { Array(v[$0 * a.shape[1]..<($0 + 1) * a.shape[1]]) }
    }

    /// The updated model answers as scikit-learn fitted on the old samples then the new rows.
    func assertAnswersLikeScikitLearn(_ model: CoreMLModel, _ oracle: Oracle, file: StaticString = #filePath, line: UInt = #line) throws {
        let search = try NearestNeighbors(try XCTUnwrap(model.kNearestNeighbors))
        XCTAssertEqual(search.k, oracle.k, file: file, line: line)
        XCTAssertEqual(search.labels.asStrings, oracle.labels, file: file, line: line)
        for (q, query) in oracle.queries.enumerated() {
            let a = search.answer(query[...])
            XCTAssertEqual(a.neighbors.map(\.sample), oracle.neighbors[q], "query \(q)", file: file, line: line)
            for (n, d) in zip(a.neighbors, oracle.distances[q]) {
                XCTAssertEqual(n.squaredDistance.squareRoot(), d, accuracy: 1e-9 * max(1, d), file: file, line: line)
            }
            for (p, e) in zip(a.probabilities, oracle.probabilities[q]) { XCTAssertEqual(p, e, accuracy: 1e-12, "query \(q)", file: file, line: line) }
            XCTAssertEqual(search.labels.asStrings[a.label], oracle.predicted[q], "query \(q)", file: file, line: line)
        }
    }

    /// Everything but the samples, the labels (and k, when `k` changed it) is as it was: the other
    /// top-level fields byte for byte, and the k-NN's other settings as decoded.
    func assertOnlySamplesChanged(_ before: CoreMLModel, _ after: CoreMLModel, kChanged: Bool = false,
                                  file: StaticString = #filePath, line: UInt = #line) throws {
        let knnField = CoreMLModelType.kNearestNeighborsClassifier.rawValue
        XCTAssertEqual(before.message.fields.filter { $0.number != knnField }.map { Array($0.raw) },
                       after.message.fields.filter { $0.number != knnField }.map { Array($0.raw) }, file: file, line: line)
        XCTAssertEqual(before.spec.description, after.spec.description, file: file, line: line)
        XCTAssertEqual(before.spec.isUpdatable, after.spec.isUpdatable, file: file, line: line)
        var a = try XCTUnwrap(before.kNearestNeighbors), b = try XCTUnwrap(after.kNearestNeighbors)
        (a.samples, a.labels, b.samples, b.labels) = ([], nil, [], nil)
        if kChanged { a.numberOfNeighbors?.defaultValue = 0; b.numberOfNeighbors?.defaultValue = 0 }
        XCTAssertEqual(a, b, file: file, line: line)
        // Read again from the written bytes: the same model.
        let reread = try CoreMLModel(serializedBytes: after.serializedBytes())
        XCTAssertEqual(reread.spec, after.spec, file: file, line: line)
    }

    /// `updraft train` with labels.txt (a label the model lacks among them) and --neighbors 7.
    func testTrainCommandAppendsLabelledRowsAndAnswersLikeScikitLearn() throws {
        let (model, oracle, data) = try fixture("update_strings")
        let input = folder.appendingPathComponent("model.mlmodel"), out = folder.appendingPathComponent("out.mlmodel")
        try FileManager.default.copyItem(at: Fixtures.url("knn/update_strings.mlmodel"), to: input)
        let log = folder.appendingPathComponent("log.jsonl")
        let run = try runUpdraft(["train", input.path, "--train", data.path, "--out", out.path, "--neighbors", "7",
                                  "--batch-size", "6", "--log", log.path], cacheDirectory: folder.appendingPathComponent("cache"))
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("1 new: elk"), run.stdout)
        XCTAssertEqual(try Data(contentsOf: input), try Data(contentsOf: Fixtures.url("knn/update_strings.mlmodel")), "the input is untouched")
        let updated = try CoreMLModel(contentsOf: out)
        let old = try XCTUnwrap(model.kNearestNeighbors), new = try XCTUnwrap(updated.kNearestNeighbors)
        XCTAssertEqual(new.samples, old.samples + (try rows(data)), "the rows appended as they are, after the old samples")
        let lines = try String(contentsOf: data.appendingPathComponent("labels.txt"), encoding: .utf8).split(separator: "\n").map(String.init)
        XCTAssertEqual(new.labels, .strings((old.labels?.asStrings ?? []) + lines))
        XCTAssertEqual(new.numberOfNeighbors, Int64Parameter(defaultValue: 7, allowed: .range(min: 1, max: 10)), "--neighbors is written, allowed values kept")
        try assertOnlySamplesChanged(model, updated, kChanged: true)
        try assertAnswersLikeScikitLearn(updated, oracle)
        // The log: trainingBegin, one miniBatchEnd per batch of 6 (20 rows: 4), one epochEnd, completion.
        let events = try String(contentsOf: log, encoding: .utf8).split(separator: "\n").map {
            try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])["event"] as? String
        }
        XCTAssertEqual(events, ["trainingBegin"] + Array(repeating: "miniBatchEnd", count: 4) + ["epochEnd", "completion"])
        let begin = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(try String(contentsOf: log, encoding: .utf8).split(separator: "\n")[0].utf8)) as? [String: Any])
        XCTAssertEqual(begin["update"] as? String, "append")
        XCTAssertNil(begin["optimizer"], "a k-NN update has no optimizer to log")
    }

    /// `UpdateTask` on an empty int64 k-NN, the labels in targets.npy: progress events per batch and
    /// per pass, the int64 labels appended, scikit-learn's answers after.
    func testUpdateTaskStartsFromAnEmptyInt64KNearestNeighbors() throws {
        let (model, oracle, data) = try fixture("update_int64")
        XCTAssertEqual(model.kNearestNeighbors?.samples.count, 0)
        let dataset = try ModelDataset(model: model, path: data)
        var config = UpdateConfiguration()
        config.parameters[.miniBatchSize] = .int(16)
        let events = Locked<[UpdateProgressEvent]>([])
        let task = UpdateTask(model: model, trainingData: dataset.provider, configuration: config,
                              handlers: UpdateHandlers(progress: { ctx in events.mutate { $0.append(ctx.event) } }))
        let end = task.run()
        XCTAssertNil(end.error)
        XCTAssertEqual(task.state, .completed)
        XCTAssertEqual(events.value, [.trainingBegin, .miniBatchEnd, .miniBatchEnd, .miniBatchEnd, .epochEnd], "40 rows in batches of 16")
        let updated = try task.currentModel()
        let knn = try XCTUnwrap(updated.kNearestNeighbors)
        XCTAssertEqual(knn.samples, try rows(data))
        let targets = try NpyArray(contentsOf: data.appendingPathComponent("targets.npy"))
        guard case let .integer(t) = targets.values else { return XCTFail("integer targets") }
        XCTAssertEqual(knn.labels, .int64(t.map(Int64.init)), "targets.npy holds an int64 k-NN's labels themselves")
        try assertOnlySamplesChanged(model, updated)
        try assertAnswersLikeScikitLearn(updated, oracle)
        // Written and read back: the same samples.
        let out = folder.appendingPathComponent("int64.mlmodel")
        try task.write(to: out)
        XCTAssertEqual(try CoreMLModel(contentsOf: out).kNearestNeighbors, knn)
    }

    /// Cancelling from a handler stops after the current batch and keeps what was appended.
    func testCancelKeepsWhatWasAppended() throws {
        let (model, _, data) = try fixture("update_int64")
        let dataset = try ModelDataset(model: model, path: data)
        var config = UpdateConfiguration()
        config.parameters[.miniBatchSize] = .int(8)
        let task = UpdateTask(model: model, trainingData: dataset.provider, configuration: config, handlers: UpdateHandlers(progress: { ctx in
            if ctx.event == .miniBatchEnd, ctx.metrics?.miniBatchIndex == 1 { ctx.task.cancel() }
        }))
        task.run()
        XCTAssertEqual(task.state, .cancelled)
        let knn = try XCTUnwrap(try task.currentModel().kNearestNeighbors)
        XCTAssertEqual(knn.samples, Array(try rows(data).prefix(16)), "two batches of 8 appended, then it stopped")
        XCTAssertEqual(knn.labels?.count, 16)
    }

    /// Anything can be a source: a plain loop over vectors and labels, for the append alone, and a
    /// new label on the bare k-NN's string model (an empty start with a default label).
    func testAnyExampleSourceAppendsToAnEmptyStringKNearestNeighbors() throws {
        struct Loop: KNearestNeighborsExampleSource {
            var count: Int { 5 }
            func labels(in range: Range<Int>) throws -> ClassLabels { .strings(range.map { $0 % 2 == 0 ? "even" : "odd" }) }
            func examples(in range: Range<Int>) throws -> (vectors: Tensor, labels: ClassLabels) {
                (Tensor(shape: Shape([range.count, 8]), data: range.flatMap { i in (0..<8).map { Float(i * 10 + $0) } }), try labels(in: range))
            }
        }
        let model = try CoreMLModel(contentsOf: Fixtures.url("knn/knn_empty.mlmodel"))
        let run = try KNearestNeighborsModelKind.resolveUpdate(model: model, configuration: UpdateConfiguration())
        let task = UpdateTask(run: run, trainingData: try ArrayBatchProvider(examples: []))
        let session = try KNearestNeighborsUpdateSession(task: task, run: run, source: Loop(), knn: model.kNearestNeighbors!,
                                                         size: model.message.serializedSize) { try $0.replacingKNearestNeighbors($1) }
        task.updateSession = session
        try session.train()
        let knn = try XCTUnwrap(try session.currentModel(updating: model).kNearestNeighbors)
        XCTAssertEqual(knn.samples, (0..<5).map { i in (0..<8).map { Float(i * 10 + $0) } })
        XCTAssertEqual(knn.labels, .strings(["even", "odd", "even", "odd", "even"]))
        XCTAssertEqual(knn.distinctLabels, ["even", "odd", "nobody"], "new labels, then the default label")
    }

    /// A session whose model is already near protobuf's limit refuses the pass before appending
    /// anything, saying how many of its samples still fit.
    func testAnUpdatePastTheTwoGiBLimitIsRefusedBeforeAnyWork() throws {
        let (model, _, data) = try fixture("update_int64")
        let dataset = try ModelDataset(model: model, path: data)
        let run = try KNearestNeighborsModelKind.resolveUpdate(model: model, configuration: UpdateConfiguration())
        let task = UpdateTask(run: run, trainingData: dataset.provider)
        let labels = try XCTUnwrap(dataset.provider as? LabelledArrays).labels(in: 0..<40)
        let perSample = labels.values.map { CoreMLModel.kNearestNeighborsBytes(dimension: 5, label: $0) }
        // Room for exactly the first 10 samples.
        let size = CoreMLModel.protobufMessageLimit - CoreMLModel.protobufSlack - perSample.prefix(10).reduce(0, +)
        XCTAssertThrowsError(try KNearestNeighborsUpdateSession(task: task, run: run, source: dataset.provider as! LabelledArrays,
                                                                knn: model.kNearestNeighbors!, size: size) { _, _ in
            XCTFail("nothing is applied"); return model
        }) { XCTAssertTrue("\($0)".contains("only 10 more samples fit"), "\($0)") }
    }

    /// labels.txt wins over targets.npy; a network classifier reads labels.txt too (its own labels
    /// only); whole-number float targets read as the integers they are.
    func testLabelsFileWinsAndNetworksReadLabels() throws {
        let dir = folder.appendingPathComponent("both")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        try NpyArray(shape: [3, 4], descr: "<f4", values: .float((0..<12).map(Float.init))).serialized().write(to: dir.appendingPathComponent("inputs.npy"))
        try Data("dog\nbird\ncat\n".utf8).write(to: dir.appendingPathComponent("labels.txt"))
        try NpyArray(shape: [3], descr: "<f4", values: .float([0, 0, 0])).serialized().write(to: dir.appendingPathComponent("targets.npy"))
        let knn = try CoreMLModel(contentsOf: Fixtures.url("knn/knn_strings_linear.mlmodel"))
        let data = try XCTUnwrap(try ModelDataset(model: knn, path: dir).provider as? LabelledArrays)
        XCTAssertEqual(try data.labels(in: 0..<3), .strings(["dog", "bird", "cat"]), "labels.txt, not targets.npy")
        XCTAssertEqual(data.labelSource, "labels.txt")
        let network = try CoreMLModel(contentsOf: Fixtures.url("dense_sgd_classifier.mlmodel"))
        let rows = try ModelDataset(model: network, path: dir).provider
        XCTAssertEqual(try (0..<3).map { try rows.target(at: $0) }, [.classIndex(1), .classIndex(2), .classIndex(0)], "indices into cat, dog, bird")
        try Data("dog\nelk\ncat\n".utf8).write(to: dir.appendingPathComponent("labels.txt"))
        XCTAssertThrowsError(try ModelDataset(model: network, path: dir)) { XCTAssertTrue("\($0)".contains("labels the model does not have: elk") || "\($0)".contains("label the model does not have: elk"), "\($0)") }
        XCTAssertEqual(try LabelledArrays(folder: dir, exampleShape: nil, modelLabels: knn.classLabels, learnsNewLabels: true, labelValuedTargets: false).newLabels, ["elk"])
        // Without labels.txt: the float targets are indices into the k-NN's labels (cat, dog, bird, unknown).
        try FileManager.default.removeItem(at: dir.appendingPathComponent("labels.txt"))
        XCTAssertEqual(try (try ModelDataset(model: knn, path: dir).provider as? LabelledArrays)?.labels(in: 0..<3), .strings(["cat", "cat", "cat"]))
    }

    /// Bad input, each a clear error before any work, the input model byte-identical and no output.
    func testBadInputIsRefusedBeforeAnyWork() throws {
        let cache = folder.appendingPathComponent("cache")
        let input = folder.appendingPathComponent("model.mlmodel"), out = folder.appendingPathComponent("out.mlmodel")
        try FileManager.default.copyItem(at: Fixtures.url("knn/knn_strings_linear.mlmodel"), to: input)
        let original = try Data(contentsOf: input)
        func data(_ name: String, rows: Int, dimension: Int, labels: [String]?, targets: [Int]? = nil) throws -> URL {
            let dir = folder.appendingPathComponent(name)
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            try NpyArray(shape: [rows, dimension], descr: "<f4", values: .float((0..<rows * dimension).map { Float($0) }))
                .serialized().write(to: dir.appendingPathComponent("inputs.npy"))
            if let labels { try Data(labels.map { $0 + "\n" }.joined().utf8).write(to: dir.appendingPathComponent("labels.txt")) }
            if let targets { try NpyArray(shape: [targets.count], descr: "<i8", values: .integer(targets)).serialized().write(to: dir.appendingPathComponent("targets.npy")) }
            return dir
        }
        func refused(_ args: [String], _ expected: [String], file: StaticString = #filePath, line: UInt = #line) throws {
            let run = try runUpdraft(["train", input.path, "--out", out.path] + args, cacheDirectory: cache)
            XCTAssertNotEqual(run.status, 0, file: file, line: line)
            for e in expected { XCTAssertTrue(run.stderr.contains(e), "'\(e)' in: \(run.stderr)", file: file, line: line) }
            XCTAssertEqual(try Data(contentsOf: input), original, "the input model is untouched", file: file, line: line)
            XCTAssertFalse(FileManager.default.fileExists(atPath: out.path), "nothing written", file: file, line: line)
        }
        try refused(["--train", data("short", rows: 4, dimension: 4, labels: ["cat", "dog", "cat"]).path], ["3 labels (lines)", "4 rows"])
        try refused(["--train", data("long", rows: 2, dimension: 4, labels: ["cat", "dog", "cat"]).path], ["3 labels (lines)", "2 rows"])
        try refused(["--train", data("wide", rows: 2, dimension: 5, labels: ["cat", "dog"]).path], ["(5 values)", "[4] (4 values)"])
        try refused(["--train", data("ok", rows: 2, dimension: 4, labels: ["cat", "dog"]).path, "--neighbors", "11"],
                    ["numberOfNeighbors = 11", "allowed values are [1, 10]"])
        try refused(["--train", data("ok2", rows: 2, dimension: 4, labels: ["cat", "dog"]).path, "--epochs", "2"], ["one pass"])
        try refused(["--train", data("ok3", rows: 2, dimension: 4, labels: ["cat", "dog"]).path, "--learning-rate", "0.1"], ["learningRate does not apply"])
        try refused(["--train", data("ok4", rows: 2, dimension: 4, labels: ["cat", "dog"]).path, "--seed", "3"], ["seed does not apply"])
        let ok5 = try data("ok5", rows: 2, dimension: 4, labels: ["cat", "dog"])
        try refused(["--train", ok5.path, "--validation", ok5.path], ["does not evaluate during the pass"])
        try refused(["--train", ok5.path, "--checkpoint-every", "1"], ["no resume state or checkpoints"])
        try refused(["--train", data("index", rows: 2, dimension: 4, labels: nil, targets: [0, 9]).path], ["target 1 is class 9"])
        // An int64 k-NN given text labels.
        try FileManager.default.removeItem(at: input)
        try FileManager.default.copyItem(at: Fixtures.url("knn/knn_int64_kdtree.mlmodel"), to: input)
        let int64Original = try Data(contentsOf: input)
        let run = try runUpdraft(["train", input.path, "--out", out.path, "--train", data("text", rows: 2, dimension: 3, labels: ["7", "cat"]).path],
                                 cacheDirectory: cache)
        XCTAssertNotEqual(run.status, 0)
        XCTAssertTrue(run.stderr.contains("line 2 is 'cat', not an integer"), run.stderr)
        XCTAssertEqual(try Data(contentsOf: input), int64Original)
        // A network has no k.
        let nn = try runUpdraft(["train", Fixtures.url("conv_image_classifier.mlmodel").path, "--train", folder.path, "--neighbors", "3",
                                 "--out", out.path], cacheDirectory: cache)
        XCTAssertNotEqual(nn.status, 0)
        XCTAssertTrue(nn.stderr.contains("apply to k-nearest-neighbors classifiers; this model is a neural network"), nn.stderr)
    }

    /// The library's checks name what is wrong: both dimensions, both label types, and how many
    /// samples still fit under protobuf's 2 GiB limit.
    func testLibraryChecksNameTheProblem() throws {
        let model = try CoreMLModel(contentsOf: Fixtures.url("knn/knn_int64_kdtree.mlmodel"))
        var knn = try XCTUnwrap(model.kNearestNeighbors)
        XCTAssertThrowsError(try knn.append(samples: [[1, 2]], labels: .int64([3]))) {
            XCTAssertTrue("\($0)".contains("dimension 2, but the k-NN's samples have dimension 3"), "\($0)")
        }
        XCTAssertThrowsError(try knn.append(samples: [[1, 2, 3]], labels: .strings(["a"]))) {
            XCTAssertTrue("\($0)".contains("string labels, but the k-NN's labels are int64"), "\($0)")
        }
        XCTAssertThrowsError(try knn.append(samples: [[1, 2, 3]], labels: .int64([1, 2]))) { XCTAssertTrue("\($0)".contains("1 sample but 2 labels"), "\($0)") }
        XCTAssertEqual(knn, model.kNearestNeighbors, "a refused append changes nothing")
        XCTAssertThrowsError(try knn.setNumberOfNeighbors(2)) { XCTAssertTrue("\($0)".contains("allowed values are {1, 3, 5}"), "\($0)") }
        // Room: exactly three more samples of label 70000 fit under this limit.
        let one = CoreMLModel.kNearestNeighborsBytes(dimension: 3, label: .int64(70000))
        XCTAssertEqual(one, 1 + 1 + (1 + 1 + 12) + 3, "FloatVector in floatSamples, and a 3-byte varint label")
        let size = model.message.serializedSize
        let limit = size + CoreMLModel.protobufSlack + 3 * one + one / 2
        XCTAssertNoThrow(try model.checkKNearestNeighborsRoom(appending: .int64([70000, 70000, 70000]), dimension: 3, limit: limit))
        XCTAssertThrowsError(try model.checkKNearestNeighborsRoom(appending: .int64(Array(repeating: 70000, count: 10)), dimension: 3, limit: limit)) {
            XCTAssertTrue("\($0)".contains("only 3 more samples fit"), "\($0)")
            XCTAssertTrue("\($0)".contains("2 GiB"), "\($0)")
            XCTAssertTrue("\($0)".contains("--max-per-label"), "\($0)")
        }
        // The estimate is the bytes a write adds.
        let appended = try model.editingKNearestNeighbors { try $0.append(samples: [[1, 2, 3], [4, 5, 6]], labels: .int64([70000, 70000])) }
        XCTAssertLessThanOrEqual(appended.message.serializedSize - size, 2 * one + CoreMLModel.protobufSlack)
        XCTAssertGreaterThanOrEqual(appended.message.serializedSize - size, 2 * one)
    }
}
