import XCTest
@testable import UpdraftCore
@testable import UpdraftModel
@testable import UpdraftChecks
@testable import UpdraftData
@testable import UpdraftTraining

/// k-nearest-neighbors classifiers and pipelines made by coremltools' own builders
/// (Tests/Scripts/make_knn_fixtures.py): read as their kinds, written back byte for byte, checked as
/// Core ML checks them and shown by inspect.
final class CoreMLNearestNeighborsTests: XCTestCase {
    struct Made: Decodable {
        var dimension: Int?
        var samples: [[Double]]
        var labels: Labels
        var k: Int64?
        var weighting: String?
        var index: String?
        var leafSize: Int32?
        var names: [String]?
        var types: [String]?
        enum Labels: Decodable {
            case strings([String]), ints([Int64])
            init(from decoder: Decoder) throws {
                let c = try decoder.singleValueContainer()
                if let s = try? c.decode([String].self) { self = .strings(s) } else { self = .ints(try c.decode([Int64].self)) }
            }
        }
    }

    func load(_ name: String) throws -> (Made, CoreMLModel, [UInt8]) {
        let bytes = [UInt8](try Data(contentsOf: Fixtures.url("knn/\(name).mlmodel")))
        let made = try JSONDecoder().decode(Made.self, from: Data(contentsOf: Fixtures.url("knn/\(name).json")))
        return (made, try CoreMLModel(serializedBytes: bytes), bytes)
    }

    func knn(_ model: CoreMLModel, file: StaticString = #filePath, line: UInt = #line) throws -> KNearestNeighborsSpec {
        guard case let .kNearestNeighbors(k) = model.spec.body else {
            XCTFail("not a k-NN: \(model.spec.modelType.name)", file: file, line: line)
            throw UpdraftError(.invalidModel, "not a k-NN")
        }
        return k
    }

    func testReadsWhatTheBuilderWroteAndWritesItBackByteForByte() throws {
        for name in ["knn_strings_linear", "knn_int64_kdtree", "knn_empty"] {
            let (made, model, bytes) = try load(name)
            XCTAssertEqual(model.spec.modelType, .kNearestNeighborsClassifier, name)
            let k = try knn(model)
            XCTAssertEqual(Int(k.dimension), made.dimension, name)
            XCTAssertEqual(k.samples, made.samples.map { $0.map(Float.init) }, name)
            switch made.labels {
            case let .strings(s): XCTAssertEqual(k.labels?.asStrings ?? [], s, name)
            case let .ints(v): XCTAssertEqual(k.labels, .int64(v), name)
            }
            XCTAssertEqual(k.numberOfNeighbors?.defaultValue, made.k, name)
            XCTAssertEqual(k.weighting?.rawValue, made.weighting, name)
            XCTAssertEqual(k.index.map { if case .linear = $0 { return "linear" } else { return "kdTree" } }, made.index, name)
            if let leaf = made.leafSize { XCTAssertEqual(k.index, .kdTree(leafSize: leaf), name) }
            XCTAssertTrue(k.squaredEuclideanDistance, name)
            XCTAssertTrue(model.isUpdatable, name)
            // Unmodified: the same bytes; encoded from the typed spec alone: the same bytes too.
            XCTAssertEqual(model.serializedBytes(), bytes, name)
            XCTAssertEqual(CoreMLModel(spec: model.spec).serializedBytes(), bytes, "\(name): encoded from the spec")
            XCTAssertEqual(ModelKinds.validate(model), [], name)
        }
        let (_, ints, _) = try load("knn_int64_kdtree")
        XCTAssertEqual(try knn(ints).numberOfNeighbors?.allowed, .set([1, 3, 5]))
        XCTAssertEqual(try knn(ints).defaultLabel, .int64(0))
        let (_, strings, _) = try load("knn_strings_linear")
        XCTAssertEqual(try knn(strings).numberOfNeighbors?.allowed, .range(min: 1, max: 10))
        XCTAssertEqual(try knn(strings).defaultLabel, .string("unknown"))
    }

    /// Early coremltools 3.0 betas wrote k as an int32 field 2: it reads as numberOfNeighbors and is
    /// written back as field 3.
    func testThePreReleaseKFieldReadsAsNumberOfNeighbors() throws {
        let (_, model, _) = try load("knn_strings_linear")
        var spec = model.spec
        guard case var .kNearestNeighbors(k) = spec.body else { return XCTFail() }
        k.numberOfNeighbors = nil
        spec.body = .kNearestNeighbors(k)
        var message = CoreMLModel(spec: spec).message
        try message.editMessage(CoreMLModelType.kNearestNeighborsClassifier.rawValue) { $0.fields.insert(ProtoField(number: 2, int64: 4), at: 1) }
        let old = try CoreMLModel(serializedBytes: message.serialized())
        XCTAssertEqual(try knn(old).numberOfNeighbors, Int64Parameter(defaultValue: 4))
        XCTAssertEqual(old.serializedBytes(), message.serialized(), "unmodified, it stays as it was")
        let rewritten = CoreMLModel(spec: old.spec).message
        let body = try ProtoMessage(parsing: try XCTUnwrap(rewritten.last(404)).payload)
        XCTAssertFalse(body.contains(2))
        XCTAssertEqual(try ProtoReader(ProtoMessage(parsing: try XCTUnwrap(body.last(3)).payload), path: "k").int64(1, "defaultValue"), 4)
        // An edit that keeps k keeps the pre-release field; one that sets k writes field 3 in its place.
        let appended = try old.editingKNearestNeighbors { try $0.append(samples: [[1, 2, 3, 4]], labels: .strings(["cat"])) }
        XCTAssertTrue(try ProtoMessage(parsing: try XCTUnwrap(appended.message.last(404)).payload).contains(2))
        let setK = try old.editingKNearestNeighbors { try $0.setNumberOfNeighbors(5) }
        let edited = try ProtoMessage(parsing: try XCTUnwrap(setK.message.last(404)).payload)
        XCTAssertFalse(edited.contains(2))
        XCTAssertEqual(try CoreMLModel(serializedBytes: setK.serializedBytes()).kNearestNeighbors?.numberOfNeighbors, Int64Parameter(defaultValue: 5))
    }

    /// Core ML's k-NN rules, every problem at once, each naming the field.
    func testTheValidatorFindsEveryProblemAtOnce() throws {
        let (_, model, _) = try load("knn_int64_kdtree")
        var spec = model.spec
        guard case var .kNearestNeighbors(k) = spec.body else { return XCTFail() }
        k.labels = .int64([7, 3])                         // 5 samples, 2 labels
        k.samples[1] = [1, 2]                             // 2 values, not 3
        k.index = .kdTree(leafSize: 0)
        k.numberOfNeighbors?.defaultValue = 2             // not in {1, 3, 5}
        k.defaultLabel = .string("none")                  // int64 labels
        spec.body = .kNearestNeighbors(k)
        let messages = ModelKinds.validate(CoreMLModel(spec: spec)).map(\.message)
        for fragment in ["holds 5 samples but 2 labels", "1 sample is not 3 long (the first, sample 1, has 2 values)",
                         "kd-tree leaf size is 0", "default 2 is outside its allowed values", "default label is a string"] {
            XCTAssertTrue(messages.contains { $0.contains(fragment) }, "\(fragment) missing from \(messages)")
        }
        // An empty k-NN needs its default label.
        let (_, empty, _) = try load("knn_empty")
        spec = empty.spec
        guard case var .kNearestNeighbors(e) = spec.body else { return XCTFail() }
        e.defaultLabel = nil
        spec.body = .kNearestNeighbors(e)
        XCTAssertTrue(ModelKinds.validate(CoreMLModel(spec: spec)).contains { $0.message.contains("no samples and no default label") })
    }

    func testAPipelineReadsItsModelsAsTheirKinds() throws {
        let (made, model, bytes) = try load("pipeline_embedding_knn")
        guard case let .pipeline(p) = model.spec.body else { return XCTFail("not a pipeline") }
        XCTAssertEqual(p.kind, .classifier)
        XCTAssertEqual(p.names, made.names)
        XCTAssertEqual(p.models.map(\.modelType.name), made.types)
        XCTAssertEqual(model.serializedBytes(), bytes)
        XCTAssertEqual(CoreMLModel(spec: model.spec).serializedBytes(), bytes, "encoded from the spec")
        let models = try model.pipelineModels()
        XCTAssertEqual(models.count, 2)
        XCTAssertEqual(models[0].layerNames, ["embed"])
        XCTAssertEqual(try knn(models[1]).samples, made.samples.map { $0.map(Float.init) })
        // Each model's bytes are the pipeline's own: they parse to the same spec.
        for m in models { XCTAssertEqual(try CoreMLModel(serializedBytes: m.serializedBytes()).spec, m.spec) }
        XCTAssertEqual(ModelKinds.validate(model), [], "the frozen extractor needs no update parameters inside an updatable pipeline")
        let text = ModelKinds.report(model, file: "p.mlmodel").text()
        XCTAssertTrue(text.contains("models: 2: embedding (neuralNetwork) -> knn (kNearestNeighborsClassifier)"), text)
        XCTAssertTrue(text.contains("model knn:"), text)
        XCTAssertTrue(text.contains("samples: 4 of dimension 4 (per label: left 2, right 2)"), text)

        // Core ML's pipeline rules.
        var spec = model.spec
        guard case var .pipeline(bad) = spec.body else { return XCTFail() }
        bad.models[0].isUpdatable = true
        bad.names = ["a", "a", "c"]
        spec.body = .pipeline(bad)
        let messages = ModelKinds.validate(CoreMLModel(spec: spec)).map(\.message)
        for fragment in ["names 3 models but holds 2", "model name 'a' is used more than once", "only the last model of an updatable pipeline may be updatable"] {
            XCTAssertTrue(messages.contains { $0.contains(fragment) }, "\(fragment) missing from \(messages)")
        }
        bad.models[0].isUpdatable = false
        bad.models[1].isUpdatable = false
        bad.names = []
        spec.body = .pipeline(bad)
        XCTAssertTrue(ModelKinds.validate(CoreMLModel(spec: spec)).contains { $0.message.contains("its last model, model 1, is not") })
    }

    /// The network-only paths, and what a kind cannot do yet, refuse other kinds by name instead of
    /// treating them as networks.
    func testNetworkOnlyPathsRefuseOtherKindsByName() throws {
        let (_, model, _) = try load("knn_strings_linear")
        XCTAssertThrowsError(try NetworkGraph(model: model)) { error in
            XCTAssertTrue("\(error)".contains("kNearestNeighborsClassifier, not a neural network"), "\(error)")
        }
        // A k-NN resolves to a run without a network: its update appends samples on the host.
        let run = try ModelKinds.resolve(model: model, configuration: UpdateConfiguration())
        XCTAssertNil(run.graph)
        XCTAssertEqual(run.description, "cpu")
        XCTAssertEqual(ModelKinds.report(model).kind, "kNearestNeighborsClassifier")
    }

    // MARK: Exact search, against scikit-learn

    struct Oracle: Decodable {
        var k: Int
        var labels: [String]
        var queries: [[Float]]
        var truth: [String]
        var neighbors: [[Int]]
        var distances: [[Double]]
        var probabilities: [[Double]]
        var predicted: [String]
        var accuracy: Double
    }

    /// Neighbours, distances, probabilities and labels as `KNeighborsClassifier(algorithm="brute")`
    /// gives them (Tests/Scripts/make_knn_oracle.py), for uniform and inverse-distance weighting.
    func testExactSearchMatchesScikitLearn() throws {
        for weighting in ["uniform", "distance"] {
            let model = try CoreMLModel(contentsOf: Fixtures.url("knn/oracle_\(weighting).mlmodel"))
            let oracle = try JSONDecoder().decode(Oracle.self, from: Data(contentsOf: Fixtures.url("knn/oracle_\(weighting).json")))
            let search = try NearestNeighbors(try knn(model))
            XCTAssertEqual(search.labels.asStrings, oracle.labels, weighting)
            XCTAssertEqual(search.k, oracle.k)
            for (q, query) in oracle.queries.enumerated() {
                let answer = search.answer(query[...])
                XCTAssertEqual(answer.neighbors.map(\.sample), oracle.neighbors[q], "\(weighting) query \(q)")
                for (n, d) in zip(answer.neighbors, oracle.distances[q]) {
                    XCTAssertEqual(n.squaredDistance.squareRoot(), d, accuracy: 1e-9 * max(1, d), "\(weighting) query \(q)")
                }
                for (p, e) in zip(answer.probabilities, oracle.probabilities[q]) { XCTAssertEqual(p, e, accuracy: 1e-12, "\(weighting) query \(q)") }
                XCTAssertEqual(search.labels.asStrings[answer.label], oracle.predicted[q], "\(weighting) query \(q)")
            }
            // Through the model's kind, as `updraft evaluate` runs it: the same probabilities.
            let data = try ModelDataset(model: model, path: Fixtures.url("knn/oracle_\(weighting)_data"))
            let predictor = try ModelKinds.predictor(model: model, batchSize: 8, warn: { XCTFail("no warning: \($0)") })
            XCTAssertEqual(predictor.classLabels, oracle.labels)
            let (p, targets) = try predictor.classify(data.provider, range: 0..<oracle.queries.count, position: "all")
            XCTAssertEqual(p.shape.dims, [oracle.queries.count, oracle.labels.count])
            for q in 0..<oracle.queries.count {
                for (c, e) in oracle.probabilities[q].enumerated() { XCTAssertEqual(Double(p.data[q * oracle.labels.count + c]), e, accuracy: 1e-6) }
                XCTAssertEqual(targets[q], .classIndex(oracle.labels.firstIndex(of: oracle.truth[q])!))
            }
        }
    }

    /// `updraft evaluate` on a k-NN: scikit-learn's accuracy on the same queries.
    func testEvaluateCommandRunsTheKNearestNeighbors() throws {
        let files = CommandTestFiles("updraft-knn-evaluate")
        defer { files.remove() }
        for weighting in ["uniform", "distance"] {
            let oracle = try JSONDecoder().decode(Oracle.self, from: Data(contentsOf: Fixtures.url("knn/oracle_\(weighting).json")))
            let run = try runUpdraft(["evaluate", Fixtures.url("knn/oracle_\(weighting).mlmodel").path,
                                      "--data", Fixtures.url("knn/oracle_\(weighting)_data").path, "--batch-size", "7", "--json"],
                                     cacheDirectory: files.cache)
            XCTAssertEqual(run.status, 0, run.stderr)
            let summary = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
            XCTAssertEqual(summary["examples"] as? Int, oracle.queries.count)
            XCTAssertEqual(try XCTUnwrap(summary["accuracy"] as? Double), oracle.accuracy, accuracy: 1e-12, weighting)
            XCTAssertEqual(summary["labels"] as? [String], oracle.labels)
        }
    }

    /// The rules Core ML leaves open, as the README states them: an empty index answers the default
    /// label; k above the sample count takes every sample; inverse-distance weighting with a sample at
    /// distance 0 lets only such samples vote; a tie in votes goes to the label of the nearest neighbour.
    func testTheRulesCoreMLLeavesOpen() throws {
        let (_, empty, _) = try load("knn_empty")
        let none = try NearestNeighbors(try knn(empty)).answer([Float](repeating: 0, count: 8)[...])
        XCTAssertEqual(none.probabilities, [1])
        XCTAssertTrue(none.neighbors.isEmpty)

        func spec(_ weighting: KNearestNeighborsSpec.Weighting, k: Int64) -> KNearestNeighborsSpec {
            KNearestNeighborsSpec(dimension: 1, samples: [[0], [1], [3], [4]], numberOfNeighbors: Int64Parameter(defaultValue: k),
                                  labels: .strings(["a", "b", "b", "a"]), defaultLabel: .string("z"), weighting: weighting)
        }
        let all = try NearestNeighbors(spec(.uniform, k: 9)).answer([2][...])
        XCTAssertEqual(all.neighbors.map(\.sample), [1, 2, 0, 3], "every sample, nearest first, ties to the lower index")
        XCTAssertEqual(all.probabilities, [0.5, 0.5, 0])
        XCTAssertEqual(all.label, 1, "a 2-2 tie goes to 'b', whose sample 1 is nearest")
        let exact = try NearestNeighbors(spec(.inverseDistance, k: 3)).answer([3][...])
        XCTAssertEqual(exact.probabilities, [0, 1, 0], "only the sample at distance 0 votes")
        let uniformExact = try NearestNeighbors(spec(.uniform, k: 3)).answer([3][...])
        XCTAssertEqual(uniformExact.probabilities, [1.0 / 3, 2.0 / 3, 0], "uniform: every neighbour votes, at distance 0 too (scikit-learn's uniform)")
        let weighted = try NearestNeighbors(spec(.inverseDistance, k: 2)).answer([0.5][...])
        XCTAssertEqual(weighted.probabilities, [0.5, 0.5, 0], "1 / 0.5 each")
        let far = try NearestNeighbors(spec(.inverseDistance, k: 2)).answer([0.25][...])
        XCTAssertEqual(far.probabilities[0], (1 / 0.25) / (1 / 0.25 + 1 / 0.75), accuracy: 1e-15, "weights are 1 / Euclidean distance")
    }
}
