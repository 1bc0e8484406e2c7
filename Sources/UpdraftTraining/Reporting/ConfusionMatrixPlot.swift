import Foundation
import UpdraftData

/// A confusion matrix drawn as a picture: one square per (true class, predicted class), shaded by
/// the fraction of the true class's examples predicted as that class (white 0, dark blue 1), with
/// the count written in it when the square is large enough; true classes down the left, predicted
/// classes along the top (labels cut to 8 characters; every class's index when there are too many
/// to name). TensorBoard shows it as the `validation/confusion_matrix` image.
struct ConfusionMatrixPlot {
    /// `counts[t][p]`: examples of true class `t` predicted as `p` (square).
    var counts: [[Int]]
    /// A name per class (the model's class labels), or none: the classes' indices.
    var labels: [String]

    private static let blue = RGB(8, 48, 107)

    func render() -> Canvas {
        let n = max(1, counts.count)
        let cell = max(4, min(40, 640 / n))
        let named = cell >= 9
        let label = { (i: Int) -> String in
            let text = i < labels.count && named ? labels[i] : "\(i)"
            return String(text.prefix(8))
        }
        let margin = named ? Canvas.textWidth(String(repeating: "m", count: 8), scale: 1) + 8 : 8
        let width = margin + n * cell + 8, height = margin + n * cell + 8
        var canvas = Canvas(width: width, height: height)
        for (t, row) in counts.enumerated() {
            let total = max(1, row.reduce(0, +))
            for (p, count) in row.enumerated() {
                let fraction = Double(count) / Double(total)
                let x = margin + p * cell, y = margin + t * cell
                canvas.fill(x: x, y: y, width: cell - 1, height: cell - 1, RGB.white.mixed(with: Self.blue, fraction))
                let text = "\(count)"
                if count > 0, Canvas.textWidth(text, scale: 1) + 2 <= cell - 1 {
                    canvas.text(text, x: x + (cell - 1 - Canvas.textWidth(text, scale: 1)) / 2,
                                y: y + (cell - 1 - Canvas.textHeight(scale: 1)) / 2, scale: 1, fraction > 0.5 ? .white : .black)
                }
            }
            if named {
                canvas.text(label(t), x: margin - 4 - Canvas.textWidth(label(t), scale: 1),
                            y: margin + t * cell + (cell - Canvas.textHeight(scale: 1)) / 2, scale: 1)
                canvas.text(label(t), x: margin + t * cell + (cell - Canvas.textHeight(scale: 1)) / 2, y: margin - 4,
                            scale: 1, vertical: true)
            }
        }
        return canvas
    }
}
