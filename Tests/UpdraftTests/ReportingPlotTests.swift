import Foundation
import XCTest
@testable import UpdraftData
@testable import UpdraftTraining

/// The raster, the bitmap font and the history plot `updraft plot` draws.
final class ReportingPlotTests: XCTestCase {
    func testNiceTicksCoverTheRangeInOneTwoFiveSteps() {
        XCTAssertEqual(HistoryPlot.niceTicks(0, 100), [0, 20, 40, 60, 80, 100])
        XCTAssertEqual(HistoryPlot.niceTicks(0, 2.97), [0, 1, 2, 3])
        XCTAssertEqual(HistoryPlot.niceTicks(0, 2.2), [0, 0.5, 1, 1.5, 2, 2.5])
        let small = HistoryPlot.niceTicks(0.013, 0.0171)
        XCTAssertLessThanOrEqual(small.first!, 0.013 + 1e-15)
        XCTAssertGreaterThanOrEqual(small.last!, 0.0171 - 1e-12)
        XCTAssertEqual(HistoryPlot.niceTicks(.nan, 1), [0, 1], "non-finite ranges do not loop")
        XCTAssertEqual(HistoryPlot.niceTicks(3, 3).count, HistoryPlot.niceTicks(3, 3).count)
        XCTAssertLessThanOrEqual(HistoryPlot.niceTicks(0, 1e300).count, 50)
    }

    func testTickLabelsUseTheDecimalsTheStepNeeds() {
        XCTAssertEqual(HistoryPlot.label(20, step: 20), "20")
        XCTAssertEqual(HistoryPlot.label(1.5, step: 0.5), "1.5")
        XCTAssertEqual(HistoryPlot.label(0.02, step: 0.01), "0.02")
        XCTAssertEqual(HistoryPlot.label(-0.0, step: 1), "0")
    }

    func testCanvasDrawsClippedLinesDotsAndText() throws {
        var canvas = Canvas(width: 40, height: 20)
        let red = RGB(200, 0, 0)
        canvas.line(2, 10, 38, 10, red, thickness: 3)
        XCTAssertEqual(canvas.pixel(x: 20, y: 10), red, "the middle of a thick line is solid")
        XCTAssertEqual(canvas.pixel(x: 20, y: 2), .white, "far from the line stays background")
        canvas.fill(x: -100, y: -100, width: 50, height: 50, red)   // wholly outside: nothing, no trap
        canvas.fill(x: 35, y: 15, width: 100, height: 100, red)     // partly outside: clipped
        XCTAssertEqual(canvas.pixel(x: 39, y: 19), red)
        canvas.line(-50, -50, 100, 100, red)                        // ends outside the canvas
        var text = Canvas(width: 40, height: 20)
        text.text("1", x: 0, y: 0, scale: 1)
        // "1" is ..#.. in its first row and .###. in its last.
        XCTAssertEqual(text.pixel(x: 2, y: 0), .black)
        XCTAssertEqual(text.pixel(x: 0, y: 0), .white)
        XCTAssertEqual((0..<5).filter { text.pixel(x: $0, y: 6) == .black }, [1, 2, 3])
        XCTAssertEqual(Canvas.textWidth("ab", scale: 2), 22)
        XCTAssertEqual(BitmapFont.pixels(of: "a").count, BitmapFont.pixels(of: "A").count, "lower case draws as capitals")
        XCTAssertEqual(BitmapFont.pixels(of: "~").count, BitmapFont.pixels(of: "?").count, "unknown characters draw as ?")
    }

    private func history(gap: Double = .nan) -> TrainingHistory {
        var h = TrainingHistory(model: "m.mlmodel", parameters: [:])
        for e in 0..<4 {
            var m = TrainingMetrics(epochIndex: e, lossValue: 2.0 - 0.4 * Double(e))
            m.meanLoss = 2.1 - 0.4 * Double(e)
            m.trainingAccuracy = 0.2 + 0.2 * Double(e)
            m.validationLoss = 2.2 - 0.4 * Double(e)
            m.validationAccuracy = 0.1 + 0.2 * Double(e)
            m.miniBatchLosses = [2.3, 2.2, gap, 2.0].map { $0 - 0.4 * Double(e) }
            h.epochs.append(m)
        }
        return h
    }

    func testPlotShowsEverySeriesWithLegendAndWritesAPNG() throws {
        let plot = try HistoryPlot(history: history())
        XCTAssertEqual(plot.panels.map(\.title), ["loss", "accuracy"])
        XCTAssertEqual(plot.panels[0].series.map(\.name), ["mini-batch loss", "train loss", "validation loss"])
        XCTAssertEqual(plot.panels[1].series.map(\.name), ["train accuracy", "validation accuracy"])
        XCTAssertEqual(plot.panels[0].series[0].points.count, 16, "every mini-batch, NaN kept as a gap")
        XCTAssertEqual(plot.panels[1].series[1].points.last!.y, 70, accuracy: 1e-9, "accuracy in percent")
        let canvas = plot.render(width: 900, height: 400)
        var colors: [String: Int] = [:]
        for y in 0..<canvas.height { for x in 0..<canvas.width {
            let p = canvas.pixel(x: x, y: y)
            if p == HistoryPlot.blue { colors["blue", default: 0] += 1 }
            if p == HistoryPlot.orange { colors["orange", default: 0] += 1 }
            if p == HistoryPlot.lightBlue { colors["light", default: 0] += 1 }
        } }
        XCTAssertGreaterThan(colors["blue"] ?? 0, 200, "training curves are drawn")
        XCTAssertGreaterThan(colors["orange"] ?? 0, 200, "validation curves are drawn")
        XCTAssertGreaterThan(colors["light"] ?? 0, 20, "mini-batch losses are drawn")
        let decoded = try DecodedImage(bytes: try plot.png(width: 900, height: 400), name: "plot.png")
        XCTAssertEqual([decoded.width, decoded.height, decoded.channels], [900, 400, 3])
        XCTAssertEqual(decoded.pixels, canvas.samples)
    }

    func testAFewHugeFirstMiniBatchLossesDoNotFlattenTheLossAxis() throws {
        var h = history(gap: 2.1)
        for e in h.epochs.indices { h.epochs[e].miniBatchLosses = (0..<50).map { 2.3 - 0.4 * Double(e) - 0.001 * Double($0) } }
        h.epochs[0].miniBatchLosses![0] = 30
        let range = HistoryPlot.yRange(of: try HistoryPlot(history: h).panels[0])
        XCTAssertEqual(range.lowerBound, 0)
        XCTAssertLessThan(range.upperBound, 3, "the 30 is drawn at the top edge, not given the axis")
        XCTAssertGreaterThanOrEqual(range.upperBound, 2.29, "every epoch value and ordinary batch loss fits")
        XCTAssertEqual(HistoryPlot.yRange(of: try HistoryPlot(history: h).panels[1]), 0...100)
    }

    func testHistoryWithoutEpochsOrAccuracyIsHandled() throws {
        XCTAssertThrowsError(try HistoryPlot(history: TrainingHistory(model: "m", parameters: [:]))) {
            XCTAssertTrue("\($0)".contains("no epochs"), "\($0)")
        }
        var h = TrainingHistory(model: "", parameters: [:])
        h.epochs = [TrainingMetrics(epochIndex: 0, lossValue: .infinity)]
        let plot = try HistoryPlot(history: h)
        XCTAssertEqual(plot.panels.count, 1, "a regressor's history has no accuracy panel")
        _ = plot.render(width: 300, height: 200)
    }

    func testTrainingHistoryKeepsEachEpochsMiniBatchLosses() throws {
        let (_, model) = try GoldenRun.load("branches_sgd")
        let data = try ArrayBatchProvider(examples: try GoldenRun.load("branches_sgd").0.examples)
        let losses = Locked<[Double]>([])
        let task = UpdateTask(model: model, trainingData: data, handlers: UpdateHandlers(
            events: [.miniBatchEnd], progress: { losses.append($0.metrics!.lossValue) }))
        XCTAssertEqual(task.run().task.state, .completed)
        XCTAssertEqual(task.history.epochs.count, 2)
        XCTAssertEqual(task.history.epochs.flatMap { $0.miniBatchLosses ?? [] }, losses.value)
    }

    func testPlotCommandWritesAPNGAndNamesAMissingHistory() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("plot-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let historyURL = dir.appendingPathComponent("m.history.json")
        try history(gap: 2.1).write(to: historyURL)
        let ok = try runUpdraft(["plot", historyURL.path, "--width", "600", "--height", "300"], cacheDirectory: dir)
        XCTAssertEqual(ok.status, 0, ok.stderr)
        let png = try DecodedImage(contentsOf: dir.appendingPathComponent("m.history.png"))
        XCTAssertEqual([png.width, png.height], [600, 300])
        let missing = try runUpdraft(["plot", dir.appendingPathComponent("nope.json").path], cacheDirectory: dir)
        XCTAssertNotEqual(missing.status, 0)
        XCTAssertTrue(missing.stderr.contains("nope.json") && missing.stderr.contains("history"), missing.stderr)
    }

    /// The legend goes to the corner that hides the fewest points: top right unless the curves run
    /// there (accuracy near 100%), then bottom right.
    func testTheLegendAvoidsTheCurves() {
        let corners = [(100, 10), (100, 80), (0, 10), (0, 80)]
        XCTAssertEqual(HistoryPlot.leastCovered(corners, width: 50, height: 20, points: []), 0, "empty: top right")
        let nearTop = (0..<20).map { (Double($0 * 8), 15.0) }
        XCTAssertEqual(HistoryPlot.leastCovered(corners, width: 50, height: 20, points: nearTop), 1, "curves along the top: bottom right")
        let everywhereButTopLeft = nearTop.filter { $0.0 > 60 } + (0..<20).map { (Double($0 * 8), 90.0) }
        XCTAssertEqual(HistoryPlot.leastCovered(corners, width: 50, height: 20, points: everywhereButTopLeft), 2)
    }
}
