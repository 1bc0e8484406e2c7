import Foundation
import UpdraftCore
import UpdraftData

/// A classifier evaluated on labelled data (what `updraft evaluate` prints), with what its
/// `--report DIR` draws: the confusion matrix as a PNG, a contact sheet of the worst mistakes (each
/// image with its true label, the predicted one and that prediction's probability), and the same as
/// JSON; for a model that answers by neighbours (a k-NN), each mistake's nearest stored samples.
public struct ClassifierEvaluation: Sendable {
    /// One example the model got wrong.
    public struct Mistake: Sendable, Codable {
        /// The example's index in the data.
        public var example: Int
        /// Its true label, the predicted one, and the probability the model gave the prediction.
        public var truth: String, predicted: String, probability: Double
        /// The probability the model gave the true label.
        public var truthProbability: Double
        /// For a k-NN: the nearest stored samples (index, label, Euclidean distance), nearest first.
        public var neighbors: [Neighbor]?
    }

    /// A stored sample near a mistaken example.
    public struct Neighbor: Sendable, Codable {
        public var sample: Int, label: String, distance: Double
    }

    /// The model's class labels, in the order of its probabilities.
    public var labels: [String]
    /// `confusion[t][p]`: examples of true class `t` predicted as `p`.
    public var confusion: [[Int]]
    /// Examples evaluated, the mean cross-entropy of their true labels, and the share predicted right.
    public var examples: Int, loss: Double, accuracy: Double
    /// Every mistake, the worst first (the lowest probability given to the true label, then the highest to the prediction).
    public var mistakes: [Mistake]

    /// Runs `predictor` over `data` in passes of `batchSize` examples (the predicted class is the most
    /// probable, a tie to the lower index). With `neighbors`, the `neighbors` of each mistake are asked for.
    /// - Throws: `.unsupported` for a model that is not a classifier; the predictor's and the data's errors.
    public static func run(_ predictor: any ModelPredictor, on data: BatchProvider, batchSize: Int,
                           neighbors: Bool = false) throws -> ClassifierEvaluation {
        guard let labels = predictor.classLabels else {
            throw UpdraftError(.unsupported, "the model is not a classifier: it has no class labels to be right or wrong about",
                               hint: "evaluate its loss (updraft evaluate without --report)")
        }
        var confusion = [[Int]](repeating: [Int](repeating: 0, count: labels.count), count: labels.count)
        var mistakes: [Mistake] = [], lossSum = 0.0, correct = 0, counted = 0
        for start in stride(from: 0, to: data.count, by: max(1, batchSize)) {
            let range = start..<min(start + batchSize, data.count)
            let (probabilities, targets) = try predictor.classify(data, range: range, position: "examples \(range.lowerBound + 1)-\(range.upperBound)")
            let classes = probabilities.shape.itemCount
            for (i, target) in targets.enumerated() {
                guard case let .classIndex(truth) = target else { continue }
                let row = Array(probabilities.data[i * classes..<(i + 1) * classes])
                let predicted = row.indices.max { row[$0] < row[$1] || (row[$0] == row[$1] && $0 > $1) }!
                counted += 1
                // A label the model does not have (a k-NN's data may bring new ones) is never predicted:
                // a mistake, outside the confusion matrix, adding nothing to the loss.
                let known = truth < classes && truth < labels.count
                if known {
                    confusion[truth][predicted] += 1
                    lossSum -= log(max(Double(row[truth]), 1e-12))
                    if predicted == truth { correct += 1; continue }
                }
                mistakes.append(Mistake(example: range.lowerBound + i, truth: known ? labels[truth] : "class \(truth) (not the model's)",
                                        predicted: labels[predicted], probability: Double(row[predicted]),
                                        truthProbability: known ? Double(row[truth]) : 0))
            }
        }
        mistakes.sort { ($0.truthProbability, -$0.probability, $0.example) < ($1.truthProbability, -$1.probability, $1.example) }
        if neighbors {
            for i in mistakes.indices {
                let input = try data.example(at: mistakes[i].example).input
                mistakes[i].neighbors = try predictor.neighbors(input, position: "example \(mistakes[i].example + 1)")?
                    .map { Neighbor(sample: $0.sample, label: $0.label, distance: $0.distance) }
            }
        }
        return ClassifierEvaluation(labels: labels, confusion: confusion, examples: counted,
                                    loss: lossSum / Double(max(1, counted)), accuracy: Double(correct) / Double(max(1, counted)),
                                    mistakes: mistakes)
    }

    /// Writes `confusion.png`, `mistakes.png` (the `worst` worst mistakes, when the examples are
    /// images) and `report.json` (everything here) into `folder`, made if missing; each file atomically.
    /// - Returns: the files written.
    @discardableResult
    public func write(to folder: URL, data: BatchProvider, worst: Int = 36) throws -> [URL] {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        var written: [URL] = []
        let confusionURL = folder.appendingPathComponent("confusion.png")
        try writeAtomically(Data(try ConfusionMatrixPlot(counts: confusion, labels: labels).render().png()), to: confusionURL)
        written.append(confusionURL)
        if let sheet = try MistakeSheet(mistakes: Array(mistakes.prefix(worst)), data: data)?.render() {
            let url = folder.appendingPathComponent("mistakes.png")
            try writeAtomically(Data(try sheet.png()), to: url)
            written.append(url)
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let url = folder.appendingPathComponent("report.json")
        try writeAtomically(try encoder.encode(Report(labels: labels, confusion: confusion, examples: examples, loss: loss,
                                                       accuracy: accuracy, mistakes: mistakes)), to: url)
        written.append(url)
        return written
    }

    private struct Report: Codable {
        var labels: [String], confusion: [[Int]], examples: Int, loss: Double, accuracy: Double, mistakes: [Mistake]
    }
}

/// The worst mistakes as a contact sheet: each example's image (its input, 0...255 before the
/// model's scaler, shown at least 64 pixels wide) with "true", "pred" and the probability under it.
struct MistakeSheet {
    var tiles: [(image: Tensor, caption: [String])]

    /// Nil when the examples are not images (`[C, H, W]` with 1 or 3 channels).
    init?(mistakes: [ClassifierEvaluation.Mistake], data: BatchProvider) throws {
        tiles = []
        for m in mistakes {
            let input = try data.example(at: m.example).input
            guard input.shape.rank == 3, [1, 3].contains(input.shape.dims[0]) else { return nil }
            tiles.append((input, ["no. \(m.example)", "true \(m.truth.prefix(10))", "pred \(m.predicted.prefix(10))",
                                  String(format: "p %.2f", m.probability)]))
        }
        if tiles.isEmpty { return nil }
    }

    func render() -> Canvas {
        let dims = tiles[0].image.shape.dims
        let (h, w) = (dims[1], dims[2])
        let zoom = max(1, 64 / max(h, w))
        let captionHeight = 4 * (Canvas.textHeight(scale: 1) + 2)
        let cellW = max(w * zoom, Canvas.textWidth("pred mmmmmmmmmm", scale: 1)) + 8, cellH = h * zoom + captionHeight + 8
        let columns = min(tiles.count, 6), rows = (tiles.count + columns - 1) / columns
        var canvas = Canvas(width: columns * cellW, height: rows * cellH)
        for (i, tile) in tiles.enumerated() {
            let x0 = (i % columns) * cellW + 4, y0 = (i / columns) * cellH + 4
            let c = tile.image.shape.dims[0]
            for y in 0..<(h * zoom) {
                for x in 0..<(w * zoom) {
                    let at = { (ch: Int) in UInt8(clamping: Int(tile.image.data[(ch * h + y / zoom) * w + x / zoom].rounded())) }
                    let color = c == 3 ? RGB(at(0), at(1), at(2)) : RGB(at(0), at(0), at(0))
                    canvas.fill(x: x0 + x, y: y0 + y, width: 1, height: 1, color)
                }
            }
            for (line, text) in tile.caption.enumerated() {
                canvas.text(text, x: x0, y: y0 + h * zoom + 2 + line * (Canvas.textHeight(scale: 1) + 2), scale: 1,
                            line == 2 ? RGB(170, 20, 20) : .black)
            }
        }
        return canvas
    }
}
