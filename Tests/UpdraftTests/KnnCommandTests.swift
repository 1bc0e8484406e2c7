import XCTest
@testable import UpdraftCore
@testable import UpdraftModel
@testable import UpdraftData
@testable import UpdraftTraining

/// Past Core ML (issue 23, item 5): `updraft knn` and the library edits behind it (remove a label,
/// cap per label, drop duplicates, count, export and import), `--neighbors` and `--unknown-distance`
/// on evaluate and predict, and `predict` on an .npy of inputs with each answer's neighbours.
final class KnnCommandTests: FolderTestCase {
    var cache: URL { folder.appendingPathComponent("cache") }

    func model(_ name: String = "oracle_uniform") throws -> (URL, CoreMLModel, KNearestNeighborsSpec) {
        let url = folder.appendingPathComponent("\(name).mlmodel")
        if !FileManager.default.fileExists(atPath: url.path) { try FileManager.default.copyItem(at: Fixtures.url("knn/\(name).mlmodel"), to: url) }
        let m = try CoreMLModel(contentsOf: url)
        return (url, m, try XCTUnwrap(m.kNearestNeighbors))
    }

    func knn(_ url: URL) throws -> KNearestNeighborsSpec { try XCTUnwrap(try CoreMLModel(contentsOf: url).kNearestNeighbors) }

    /// Removing a label keeps every other sample in order; the input file is untouched.
    func testRemoveLabelKeepsTheOthersInOrder() throws {
        let (url, _, before) = try model()
        let original = try Data(contentsOf: url)
        let out = folder.appendingPathComponent("out.mlmodel")
        let run = try runUpdraft(["knn", url.path, "--remove-label", "bee", "--out", out.path], cacheDirectory: cache)
        XCTAssertEqual(run.status, 0, run.stderr)
        let texts = before.sampleLabelTexts
        let kept = texts.indices.filter { texts[$0] != "bee" }
        XCTAssertTrue(run.stdout.contains("removed \(texts.count - kept.count) samples labelled 'bee'"), run.stdout)
        let after = try knn(out)
        XCTAssertEqual(after.samples, kept.map { before.samples[$0] })
        XCTAssertEqual(after.sampleLabelTexts, kept.map { texts[$0] })
        XCTAssertEqual(try Data(contentsOf: url), original, "--out differs: MODEL is untouched")
        // Everything else is as it was.
        var a = before, b = after
        (a.samples, a.labels, b.samples, b.labels) = ([], nil, [], nil)
        XCTAssertEqual(a, b)
        let missing = try runUpdraft(["knn", url.path, "--remove-label", "yak", "--out", out.path], cacheDirectory: cache)
        XCTAssertNotEqual(missing.status, 0)
        XCTAssertTrue(missing.stderr.contains("no sample of the k-NN is labelled 'yak'"), missing.stderr)
    }

    /// The per-label cap: at most N per label, a subset kept in order, the same for the same seed.
    func testCapPerLabelIsSeededAndKeepsASubsetInOrder() throws {
        let (_, _, before) = try model()
        let counts = Dictionary(uniqueKeysWithValues: before.samplesPerLabel.map { ($0.label, $0.count) })
        var a = before, b = before, c = before
        let removed = try a.capSamplesPerLabel(10, seed: 7)
        try b.capSamplesPerLabel(10, seed: 7)
        try c.capSamplesPerLabel(10, seed: 8)
        XCTAssertEqual(a, b, "the same seed keeps the same samples")
        XCTAssertNotEqual(a, c, "another seed another choice (labels with more than 10 samples: \(counts))")
        XCTAssertEqual(removed, counts.values.reduce(0) { $0 + max(0, $1 - 10) })
        for (label, n) in a.samplesPerLabel { XCTAssertEqual(n, min(10, counts[label]!), label) }
        // A subsequence of the original (sample, label) pairs.
        var i = 0
        for (s, l) in zip(a.samples, a.sampleLabelTexts) {
            while i < before.samples.count && (before.samples[i] != s || before.sampleLabelTexts[i] != l) { i += 1 }
            XCTAssertLessThan(i, before.samples.count, "kept samples appear in the original order")
            i += 1
        }
        // Algorithm R, replayed here from its definition, for one label.
        let label = counts.first { $0.value > 10 }!.key
        let members = before.sampleLabelTexts.indices.filter { before.sampleLabelTexts[$0] == label }
        var rng = SplitMix64(seed: 7 ^ label.utf8.reduce(0xcbf2_9ce4_8422_2325 as UInt64) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 })
        var reservoir = Array(members.prefix(10))
        for j in 10..<members.count { let r = Int(rng.next() % UInt64(j + 1)); if r < 10 { reservoir[r] = members[j] } }
        XCTAssertEqual(a.samples.enumerated().filter { a.sampleLabelTexts[$0.offset] == label }.map(\.element),
                       reservoir.sorted().map { before.samples[$0] })
        XCTAssertThrowsError(try a.capSamplesPerLabel(0, seed: 0))
        // Through the command: the same file twice, and the model's own bytes for what did not change.
        let (url, m, _) = try model()
        let out1 = folder.appendingPathComponent("c1.mlmodel"), out2 = folder.appendingPathComponent("c2.mlmodel")
        for out in [out1, out2] {
            let run = try runUpdraft(["knn", url.path, "--max-per-label", "10", "--seed", "7", "--out", out.path], cacheDirectory: cache)
            XCTAssertEqual(run.status, 0, run.stderr)
        }
        XCTAssertEqual(try Data(contentsOf: out1), try Data(contentsOf: out2))
        XCTAssertEqual(try knn(out1), a)
        XCTAssertEqual(try CoreMLModel(contentsOf: out1).message.fields.filter { $0.number != 404 }.map { Array($0.raw) },
                       m.message.fields.filter { $0.number != 404 }.map { Array($0.raw) })
    }

    /// Export then import: the exported files hold the samples and labels; importing them appends
    /// each once more; --dedupe then removes exactly those copies.
    func testExportImportAndDedupe() throws {
        let (url, _, before) = try model("knn_strings_linear")
        let exported = folder.appendingPathComponent("exported")
        let doubled = folder.appendingPathComponent("doubled.mlmodel")
        let run = try runUpdraft(["knn", url.path, "--export", exported.path], cacheDirectory: cache)
        XCTAssertEqual(run.status, 0, run.stderr)
        let inputs = try NpyArray(contentsOf: exported.appendingPathComponent("inputs.npy"))
        XCTAssertEqual(inputs.shape, [before.samples.count, Int(before.dimension)])
        XCTAssertEqual(inputs.values, .float(before.samples.flatMap { $0 }))
        XCTAssertEqual(try String(contentsOf: exported.appendingPathComponent("labels.txt"), encoding: .utf8),
                       before.sampleLabelTexts.map { $0 + "\n" }.joined())
        let imported = try runUpdraft(["knn", url.path, "--import", exported.path, "--out", doubled.path, "--json"], cacheDirectory: cache)
        XCTAssertEqual(imported.status, 0, imported.stderr)
        let summary = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(imported.stdout.utf8)) as? [String: Any])
        XCTAssertEqual(summary["samples"] as? Int, 2 * before.samples.count)
        let twice = try knn(doubled)
        XCTAssertEqual(twice.samples, before.samples + before.samples)
        XCTAssertEqual(twice.sampleLabelTexts, before.sampleLabelTexts + before.sampleLabelTexts)
        // A copy with another label is no duplicate.
        var relabelled = twice
        try relabelled.append(samples: [before.samples[0]], labels: .strings(["other"]))
        XCTAssertEqual(relabelled.removeDuplicateSamples(), before.samples.count)
        XCTAssertEqual(relabelled.samples, before.samples + [before.samples[0]])
        XCTAssertEqual(relabelled.sampleLabelTexts, before.sampleLabelTexts + ["other"])
        let deduped = folder.appendingPathComponent("deduped.mlmodel")
        XCTAssertEqual(try runUpdraft(["knn", doubled.path, "--dedupe", "--out", deduped.path], cacheDirectory: cache).status, 0)
        XCTAssertEqual(try knn(deduped), before, "back to the original k-NN")
        XCTAssertEqual(try Data(contentsOf: deduped), try Data(contentsOf: url), "and to its bytes: only the changed fields were re-encoded")
        // Usage: an edit needs --out.
        let noOut = try runUpdraft(["knn", url.path, "--dedupe"], cacheDirectory: cache)
        XCTAssertNotEqual(noOut.status, 0)
        XCTAssertTrue(noOut.stderr.contains("--out"), noOut.stderr)
        // Importing rows of the wrong width names both dimensions.
        let wide = folder.appendingPathComponent("wide")
        try FileManager.default.createDirectory(at: wide, withIntermediateDirectories: true)
        try NpyArray(shape: [1, 5], descr: "<f4", values: .float([1, 2, 3, 4, 5])).serialized().write(to: wide.appendingPathComponent("inputs.npy"))
        try Data("cat\n".utf8).write(to: wide.appendingPathComponent("labels.txt"))
        let bad = try runUpdraft(["knn", url.path, "--import", wide.path, "--out", doubled.path], cacheDirectory: cache)
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertTrue(bad.stderr.contains("dimension 5, but the k-NN's samples have dimension 4"), bad.stderr)
    }

    /// Counts per label, as a plain loop counts them.
    func testCountsPerLabel() throws {
        let (url, _, before) = try model()
        let run = try runUpdraft(["knn", url.path, "--json"], cacheDirectory: cache)
        XCTAssertEqual(run.status, 0, run.stderr)
        let summary = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        var expected: [String: Int] = [:]
        for l in before.sampleLabelTexts { expected[l, default: 0] += 1 }
        let listed = try XCTUnwrap(summary["labels"] as? [[String: Any]])
        XCTAssertEqual(Dictionary(uniqueKeysWithValues: listed.map { ($0["label"] as! String, $0["count"] as! Int) }), expected)
        XCTAssertEqual(summary["samples"] as? Int, before.samples.count)
    }

    /// `predict` on an .npy: one answer per row, the JSON's shape kept ("input", "top") with each
    /// answer's neighbours (sample, label, Euclidean distance) as a plain loop finds them; --neighbors
    /// changes k; --unknown-distance answers the default label past it.
    func testPredictTakesNpyRowsAndListsNeighbors() throws {
        let (url, _, spec) = try model()
        let queries = Fixtures.url("knn/oracle_uniform_data/inputs.npy")
        let run = try runUpdraft(["predict", url.path, queries.path, "--json", "--neighbors", "3", "--top", "1"], cacheDirectory: cache)
        XCTAssertEqual(run.status, 0, run.stderr)
        let lines = run.stdout.split(separator: "\n")
        let array = try NpyArray(contentsOf: queries)
        XCTAssertEqual(lines.count, array.shape[0])
        guard case let .float(values) = array.values else { return XCTFail("float queries") }
        let d = Int(spec.dimension)
        for (r, line) in lines.enumerated() {
            let obj = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            XCTAssertEqual(obj["input"] as? String, "\(queries.path)[\(r)]")
            let q = values[r * d..<(r + 1) * d]
            // The three nearest by a plain loop (Double, ties to the lower index).
            let distances: [(sample: Int, distance: Double)] = spec.samples.indices.map { (sample: $0, distance: squaredDistance(spec.samples[$0], q)) }
            let ranked = Array(distances.sorted { (a, b) -> Bool in a.distance < b.distance || (a.distance == b.distance && a.sample < b.sample) }.prefix(3))
            let neighbors = try XCTUnwrap(obj["neighbors"] as? [[String: Any]])
            XCTAssertEqual(neighbors.map { $0["sample"] as? Int }, ranked.map(\.sample))
            XCTAssertEqual(neighbors.map { $0["label"] as? String }, ranked.map { spec.sampleLabelTexts[$0.sample] })
            for (n, e) in zip(neighbors, ranked) { XCTAssertEqual(try XCTUnwrap(n["distance"] as? Double), e.distance.squareRoot(), accuracy: 1e-9) }
            XCTAssertEqual((obj["top"] as? [[String: Any]])?.count, 1)
        }
        // Past the unknown distance: the default label, with probability 1; within it, the vote.
        let far = folder.appendingPathComponent("far.npy")
        try NpyArray(shape: [2, d], descr: "<f4", values: .float(Array(repeating: 1000, count: d) + Array(spec.samples[0])))
            .serialized().write(to: far)
        let unknown = try runUpdraft(["predict", url.path, far.path, "--json", "--unknown-distance", "5", "--top", "1"], cacheDirectory: cache)
        XCTAssertEqual(unknown.status, 0, unknown.stderr)
        let answers = try unknown.stdout.split(separator: "\n").map { try XCTUnwrap(JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
        XCTAssertEqual(((answers[0]["top"] as? [[String: Any]])?.first)?["label"] as? String, "none")
        XCTAssertEqual(((answers[0]["top"] as? [[String: Any]])?.first)?["probability"] as? Double, 1)
        XCTAssertNotEqual(((answers[1]["top"] as? [[String: Any]])?.first)?["label"] as? String, "none")
        // The library: the same rule, and its checks.
        let search = try NearestNeighbors(spec, unknownDistance: 5)
        XCTAssertTrue(search.answer([Float](repeating: 1000, count: d)[...]).isUnknown)
        XCTAssertFalse(search.answer(spec.samples[0][...]).isUnknown)
        XCTAssertThrowsError(try NearestNeighbors(spec, unknownDistance: -1))
        var noDefault = spec
        noDefault.defaultLabel = nil
        XCTAssertThrowsError(try NearestNeighbors(noDefault, unknownDistance: 1)) { XCTAssertTrue("\($0)".contains("no default label"), "\($0)") }
        // A row of the wrong width is refused before any answer.
        let wrong = try runUpdraft(["predict", url.path, Fixtures.url("knn/update_int64_train/inputs.npy").path], cacheDirectory: cache)
        XCTAssertNotEqual(wrong.status, 0)
        XCTAssertTrue(wrong.stderr.contains("shape [40, 5]"), wrong.stderr)
    }

    /// `--neighbors` on evaluate: k within the allowed values changes the votes as scikit-learn's k
    /// would (here k = 1: each query's nearest sample's label); outside them a clear error.
    func testEvaluateNeighborsOverride() throws {
        let (url, _, spec) = try model("update_strings")
        let data = Fixtures.url("knn/update_strings_train")
        let run = try runUpdraft(["evaluate", url.path, "--data", data.path, "--neighbors", "1", "--json"], cacheDirectory: cache)
        XCTAssertEqual(run.status, 0, run.stderr)
        let summary = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(run.stdout.utf8)) as? [String: Any])
        let rows = try NpyArray(contentsOf: data.appendingPathComponent("inputs.npy"))
        guard case let .float(v) = rows.values else { return XCTFail("float rows") }
        let truth = try String(contentsOf: data.appendingPathComponent("labels.txt"), encoding: .utf8).split(separator: "\n").map(String.init)
        let d = Int(spec.dimension)
        var correct = 0
        for r in 0..<truth.count {
            let q = v[r * d..<(r + 1) * d]
            let nearest = spec.samples.indices.min { a, b in
                let da = squaredDistance(spec.samples[a], q), db = squaredDistance(spec.samples[b], q)
                return da < db || (da == db && a < b)
            }!
            if spec.sampleLabelTexts[nearest] == truth[r] { correct += 1 }
        }
        XCTAssertEqual(try XCTUnwrap(summary["accuracy"] as? Double), Double(correct) / Double(truth.count), accuracy: 1e-12,
                       "labels.txt read as labels; 'elk', which the model lacks, is never right")
        let bad = try runUpdraft(["evaluate", url.path, "--data", data.path, "--neighbors", "0"], cacheDirectory: cache)
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertTrue(bad.stderr.contains("numberOfNeighbors = 0"), bad.stderr)
    }
}

/// The squared Euclidean distance in Double, by a plain loop.
private func squaredDistance(_ a: [Float], _ b: ArraySlice<Float>) -> Double {
    var sum = 0.0
    for (x, y) in zip(a, b) {
        let t = Double(x) - Double(y)
        sum += t * t
    }
    return sum
}
