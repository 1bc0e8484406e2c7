import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftModel
@testable import UpdraftPlacement
@testable import UpdraftData
@testable import UpdraftTraining

/// `ClassifierEvaluation` and `updraft evaluate --report DIR`: the confusion matrix, the worst
/// mistakes drawn and listed, and for a k-NN each mistake's nearest stored samples.
final class EvaluationReportTests: FolderTestCase {
    /// Width and height from a PNG's IHDR chunk.
    private func pngSize(_ url: URL) throws -> (Int, Int) {
        let b = [UInt8](try Data(contentsOf: url))
        XCTAssertEqual(Array(b.prefix(4)), [0x89, 0x50, 0x4E, 0x47])
        let be = { (o: Int) in (0..<4).reduce(0) { $0 << 8 | Int(b[o + $1]) } }
        return (be(16), be(20))
    }

    func testAnImageClassifiersReportListsEveryMistakeWorstFirst() throws {
        let model = try CoreMLModel(contentsOf: Fixtures.url("conv_image_classifier.mlmodel"))
        let images = folder.appendingPathComponent("images")
        writeNoisyImageFolder(images, perLabel: 6, seed: 12)
        let data = try ModelDataset(model: model, path: images).provider
        var config = UpdateConfiguration()
        config.placement.computeUnits = .cpuOnly
        let predictor = try ModelKinds.predictor(model: model, configuration: config, batchSize: 5, warn: { _ in })
        let result = try ClassifierEvaluation.run(predictor, on: data, batchSize: 5)
        XCTAssertEqual(result.examples, 12)
        XCTAssertEqual(result.confusion.flatMap { $0 }.reduce(0, +), 12)
        let correct = result.confusion.indices.reduce(0) { $0 + result.confusion[$1][$1] }
        XCTAssertEqual(result.mistakes.count, 12 - correct)
        XCTAssertEqual(result.accuracy, Double(correct) / 12, accuracy: 1e-12)
        // Worst first, each mistake as the predictor answers it alone.
        XCTAssertEqual(result.mistakes.map(\.truthProbability), result.mistakes.map(\.truthProbability).sorted())
        for m in result.mistakes {
            XCTAssertNotEqual(m.truth, m.predicted)
            let p = try predictor.classify(try data.example(at: m.example).input, position: "")
            XCTAssertEqual(m.probability, Double(p.data.max()!), accuracy: 1e-5)
        }

        let report = folder.appendingPathComponent("report")
        let run = try runUpdraft(["evaluate", Fixtures.url("conv_image_classifier.mlmodel").path, "--data", images.path,
                                  "--report", report.path, "--compute-units", "cpuOnly"], cacheDirectory: folder)
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("accuracy: \(String(format: "%.2f", result.accuracy * 100))%"), run.stdout)
        let (w, h) = try pngSize(report.appendingPathComponent("confusion.png"))
        XCTAssertGreaterThan(w * h, 0)
        struct Saved: Decodable { var examples: Int; var confusion: [[Int]]; var mistakes: [ClassifierEvaluation.Mistake] }
        let saved = try JSONDecoder().decode(Saved.self, from: Data(contentsOf: report.appendingPathComponent("report.json")))
        XCTAssertEqual(saved.confusion, result.confusion)
        XCTAssertEqual(saved.mistakes.map(\.example), result.mistakes.map(\.example))
        if !result.mistakes.isEmpty {
            let (sw, sh) = try pngSize(report.appendingPathComponent("mistakes.png"))
            XCTAssertGreaterThanOrEqual(sw, 64)
            XCTAssertGreaterThanOrEqual(sh, 64)
        }
    }

    /// A k-NN's mistakes come with their nearest stored samples, as the search finds them.
    func testAKNearestNeighborsMistakesNameTheirNeighbors() throws {
        let model = try CoreMLModel(contentsOf: Fixtures.url("knn/oracle_uniform.mlmodel"))
        let data = try ModelDataset(model: model, path: Fixtures.url("knn/oracle_uniform_data")).provider
        let predictor = try ModelKinds.predictor(model: model, batchSize: data.count, warn: { _ in })
        let result = try ClassifierEvaluation.run(predictor, on: data, batchSize: 7, neighbors: true)
        XCTAssertFalse(result.mistakes.isEmpty, "the oracle's fixture has mistakes (accuracy 0.92)")
        let search = try NearestNeighbors(try XCTUnwrap(model.kNearestNeighbors))
        for m in result.mistakes {
            let near = try XCTUnwrap(m.neighbors)
            let expected = search.neighbors(of: try data.example(at: m.example).input.data[...])
            XCTAssertEqual(near.map(\.sample), expected.map(\.sample))
            for (a, b) in zip(near, expected) { XCTAssertEqual(a.distance, b.squaredDistance.squareRoot(), accuracy: 1e-9) }
        }
        // Vectors, not images: no contact sheet, the neighbours in the JSON.
        let files = try result.write(to: folder.appendingPathComponent("knn-report"), data: data)
        XCTAssertEqual(files.map(\.lastPathComponent), ["confusion.png", "report.json"])
        let json = try String(contentsOf: files[1], encoding: .utf8)
        XCTAssertTrue(json.contains("\"neighbors\""), json)
    }
}
