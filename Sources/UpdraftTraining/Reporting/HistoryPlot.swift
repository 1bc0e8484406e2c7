import Foundation
import UpdraftCore
import UpdraftData

/// Loss and accuracy curves of a training history, drawn the way DIGITS shows them: a loss panel
/// (every mini-batch's loss, the epoch's mean training loss and the validation loss) beside an
/// accuracy panel (training and validation accuracy per epoch), against epochs.
public struct HistoryPlot: Sendable {
    /// One curve: points in data coordinates; non-finite values break the line.
    public struct Series: Sendable {
        /// The label shown in the panel's legend ("train loss", "validation accuracy", ...).
        public var name: String
        /// The line and marker color.
        public var color: RGB
        /// The curve's points, x in epochs (1 = end of the first epoch), y in the panel's units.
        public var points: [(x: Double, y: Double)]
        /// Line width, in pixels; default 2.5.
        public var thickness: Double
        /// Whether each point gets a dot (epoch curves do; the mini-batch loss curve does not).
        public var markers: Bool
        /// A curve with the given style; defaults: 2.5-pixel line with markers.
        public init(name: String, color: RGB, points: [(x: Double, y: Double)], thickness: Double = 2.5,
                    markers: Bool = true) {
            self.name = name; self.color = color; self.points = points
            self.thickness = thickness; self.markers = markers
        }
    }

    /// One chart: its title, y-axis label and curves.
    public struct Panel: Sendable {
        /// The heading drawn above the panel ("loss", "accuracy").
        public var title: String
        /// The y-axis label ("loss", "accuracy (%)").
        public var yLabel: String
        /// The curves drawn in the panel, in drawing order (later ones on top).
        public var series: [Series]
        /// Fixed y range, or nil to fit the data (from 0 when all values are positive).
        public var yRange: ClosedRange<Double>?
    }

    /// The heading above the panels: "training history: <model>".
    public var title: String
    /// The x-axis label; default "epoch".
    public var xLabel = "epoch"
    /// The right end of the x axis: the last epoch's number (1-based).
    public var xMax: Double
    /// The charts, left to right: loss, then accuracy when the history has any.
    public var panels: [Panel]

    static let blue = RGB(31, 119, 180), orange = RGB(255, 127, 14), lightBlue = RGB(160, 196, 226)
    static let grid = RGB(225, 225, 225), axis = RGB(60, 60, 60)

    /// The plot of `history`. Throws when the history has no epochs to draw.
    public init(history: TrainingHistory) throws {
        let epochs = history.epochs.sorted { $0.epochIndex < $1.epochIndex }
        guard !epochs.isEmpty else {
            throw UpdraftError(.invalidArgument, "the training history\(history.model.isEmpty ? "" : " of \(history.model)") has no epochs to plot",
                               hint: "plot the history written after at least one epoch (<model>.history.json)")
        }
        func perEpoch(_ value: (TrainingMetrics) -> Double?, scale: Double = 1) -> [(x: Double, y: Double)] {
            epochs.compactMap { m in value(m).map { (Double(m.epochIndex + 1), $0 * scale) } }
        }
        var batchPoints: [(x: Double, y: Double)] = []
        for m in epochs {
            let losses = m.miniBatchLosses ?? []
            for (i, loss) in losses.enumerated() {
                batchPoints.append((Double(m.epochIndex) + Double(i + 1) / Double(losses.count), loss))
            }
        }
        var loss: [Series] = []
        if !batchPoints.isEmpty {
            loss.append(Series(name: "mini-batch loss", color: Self.lightBlue, points: batchPoints, thickness: 1.2, markers: false))
        }
        loss.append(Series(name: "train loss", color: Self.blue, points: perEpoch { $0.meanLoss ?? $0.lossValue }))
        let validationLoss = perEpoch { $0.validationLoss }
        if !validationLoss.isEmpty { loss.append(Series(name: "validation loss", color: Self.orange, points: validationLoss)) }
        var accuracy: [Series] = []
        let trainAccuracy = perEpoch({ $0.trainingAccuracy }, scale: 100)
        if !trainAccuracy.isEmpty { accuracy.append(Series(name: "train accuracy", color: Self.blue, points: trainAccuracy)) }
        let validationAccuracy = perEpoch({ $0.validationAccuracy }, scale: 100)
        if !validationAccuracy.isEmpty {
            accuracy.append(Series(name: "validation accuracy", color: Self.orange, points: validationAccuracy))
        }
        title = "training history" + (history.model.isEmpty ? "" : ": \(history.model)")
        xMax = Double(epochs.last!.epochIndex + 1)
        panels = [Panel(title: "loss", yLabel: "loss", series: loss, yRange: nil)]
        if !accuracy.isEmpty {
            panels.append(Panel(title: "accuracy", yLabel: "accuracy (%)", series: accuracy, yRange: 0...100))
        }
    }

    /// Draws the plot on a canvas of the given size.
    public func render(width: Int = 1200, height: Int = 520) -> Canvas {
        var canvas = Canvas(width: width, height: height)
        canvas.text(title, x: 20, y: 14, scale: 2)
        let top = 48, panelWidth = width / panels.count
        for (i, panel) in panels.enumerated() {
            draw(panel, on: &canvas, x: i * panelWidth, y: top, width: panelWidth, height: height - top)
        }
        return canvas
    }

    /// The plot as a PNG file.
    public func png(width: Int = 1200, height: Int = 520) throws -> [UInt8] {
        try render(width: width, height: height).png()
    }

    /// The y range a panel shows: its fixed range, else the data's from 0 (or the least value when
    /// negative). A thin series without markers (every mini-batch's loss) counts only up to its 98th
    /// percentile, so a few huge first losses do not flatten the epochs' curves; points above are drawn
    /// at the top edge.
    static func yRange(of panel: Panel) -> ClosedRange<Double> {
        if let fixed = panel.yRange { return fixed }
        var values = panel.series.filter(\.markers).flatMap { $0.points.map(\.y) }.filter(\.isFinite)
        for series in panel.series where !series.markers {
            let sorted = series.points.map(\.y).filter(\.isFinite).sorted()
            guard !sorted.isEmpty else { continue }
            values.append(sorted[min(sorted.count - 1, Int((Double(sorted.count - 1) * 0.98).rounded(.up)))])
            values.append(sorted[0])
        }
        let low = min(0, values.min() ?? 0)
        let high = values.max() ?? 1
        return low...(high > low ? high : low + 1)
    }

    /// Ticks at 1, 2 or 5 times a power of ten covering `low...high`, about `count` of them.
    static func niceTicks(_ low: Double, _ high: Double, count: Int = 5) -> [Double] {
        guard low.isFinite, high.isFinite else { return [0, 1] }
        let span = high > low ? high - low : max(abs(high), 1)
        let rough = span / Double(max(1, count))
        let magnitude = pow(10, (log10(rough)).rounded(.down))
        let step = [1.0, 2, 5, 10].map { $0 * magnitude }.first { $0 >= rough } ?? 10 * magnitude
        let first = (low / step).rounded(.down) * step
        var ticks: [Double] = []
        var t = first
        while t < high + step * 0.999 && ticks.count < 50 { ticks.append(t); t += step }
        return ticks
    }

    /// A tick label with as many decimals as the step needs.
    static func label(_ value: Double, step: Double) -> String {
        let decimals = max(0, Int((-log10(step)).rounded(.up)))
        let text = String(format: "%.\(decimals)f", value)
        return text == "-0" ? "0" : text
    }

    private func draw(_ panel: Panel, on canvas: inout Canvas, x: Int, y: Int, width: Int, height: Int) {
        let left = x + 84, right = x + width - 24, top = y + 30, bottom = y + height - 56
        guard right > left + 10, bottom > top + 10 else { return }
        let range = Self.yRange(of: panel)
        var yLow = range.lowerBound, yHigh = range.upperBound
        let yTicks = Self.niceTicks(yLow, yHigh)
        yLow = min(yLow, yTicks.first!); yHigh = max(yHigh, yTicks.last!)
        let xTicks = Self.niceTicks(0, xMax, count: min(10, max(1, Int(xMax)))).filter { $0 == $0.rounded() || xMax < 2 }
        func px(_ v: Double) -> Double { Double(left) + (v / max(xMax, 1e-12)) * Double(right - left) }
        func py(_ v: Double) -> Double { Double(bottom) - (v - yLow) / (yHigh - yLow) * Double(bottom - top) }

        canvas.text(panel.title, x: left, y: y + 6, scale: 2)
        let yStep = yTicks.count > 1 ? yTicks[1] - yTicks[0] : 1
        for t in yTicks where t >= yLow - 1e-9 && t <= yHigh + 1e-9 {
            let ty = py(t)
            canvas.line(Double(left), ty, Double(right), ty, Self.grid, thickness: 1)
            let text = Self.label(t, step: yStep)
            canvas.text(text, x: left - 8 - Canvas.textWidth(text), y: Int(ty) - 7, scale: 2, Self.axis)
        }
        let xStep = xTicks.count > 1 ? xTicks[1] - xTicks[0] : 1
        for t in xTicks where t <= xMax + 1e-9 {
            let tx = px(t)
            canvas.line(tx, Double(top), tx, Double(bottom), Self.grid, thickness: 1)
            let text = Self.label(t, step: xStep)
            canvas.text(text, x: Int(tx) - Canvas.textWidth(text) / 2, y: bottom + 8, scale: 2, Self.axis)
        }
        canvas.line(Double(left), Double(top), Double(left), Double(bottom), Self.axis, thickness: 1.5)
        canvas.line(Double(left), Double(bottom), Double(right), Double(bottom), Self.axis, thickness: 1.5)
        canvas.text(xLabel, x: (left + right - Canvas.textWidth(xLabel)) / 2, y: bottom + 32, scale: 2, Self.axis)
        canvas.text(panel.yLabel, x: x + 8, y: (top + bottom + Canvas.textWidth(panel.yLabel)) / 2, scale: 2,
                    Self.axis, vertical: true)

        for series in panel.series {
            var previous: (Double, Double)?
            for point in series.points {
                guard point.x.isFinite, point.y.isFinite else { previous = nil; continue }
                let p = (px(point.x), py(min(max(point.y, yLow), yHigh)))
                if let q = previous { canvas.line(q.0, q.1, p.0, p.1, series.color, thickness: series.thickness) }
                if series.markers { canvas.dot(p.0, p.1, radius: 4, series.color) }
                previous = p
            }
        }
        let plotted = panel.series.flatMap { s in
            s.points.filter { $0.x.isFinite && $0.y.isFinite }.map { (px($0.x), py(min(max($0.y, yLow), yHigh))) }
        }
        drawLegend(panel.series, on: &canvas, left: left, right: right, top: top, bottom: bottom, avoiding: plotted)
    }

    /// The index of the first box (top-left corners, all `width` x `height`) that covers the fewest
    /// points, with a few pixels of margin.
    static func leastCovered(_ corners: [(Int, Int)], width: Int, height: Int, points: [(Double, Double)]) -> Int {
        func covered(_ corner: (Int, Int)) -> Int {
            let margin = 6.0
            let x0 = Double(corner.0) - margin, x1 = Double(corner.0 + width) + margin
            let y0 = Double(corner.1) - margin, y1 = Double(corner.1 + height) + margin
            return points.reduce(0) { $0 + ($1.0 >= x0 && $1.0 <= x1 && $1.1 >= y0 && $1.1 <= y1 ? 1 : 0) }
        }
        let counts = corners.map(covered)
        return counts.firstIndex(of: counts.min()!)!
    }

    /// Draws the legend in the corner of the plot area (top right first, then bottom right, top
    /// left, bottom left) whose box covers the fewest plotted points.
    private func drawLegend(_ series: [Series], on canvas: inout Canvas, left: Int, right: Int, top: Int, bottom: Int,
                            avoiding points: [(Double, Double)]) {
        guard !series.isEmpty else { return }
        let rowHeight = 22, swatch = 28
        let textWidth = series.map { Canvas.textWidth($0.name) }.max()!
        let boxWidth = 16 + swatch + 10 + textWidth + 12, boxHeight = 10 + rowHeight * series.count
        let corners = [(right - boxWidth - 10, top + 10), (right - boxWidth - 10, bottom - boxHeight - 10),
                       (left + 10, top + 10), (left + 10, bottom - boxHeight - 10)]
        let (bx, by) = corners[Self.leastCovered(corners, width: boxWidth, height: boxHeight, points: points)]
        canvas.fill(x: bx, y: by, width: boxWidth, height: boxHeight, .white)
        let frame = RGB(190, 190, 190)
        canvas.line(Double(bx), Double(by), Double(bx + boxWidth), Double(by), frame)
        canvas.line(Double(bx), Double(by + boxHeight), Double(bx + boxWidth), Double(by + boxHeight), frame)
        canvas.line(Double(bx), Double(by), Double(bx), Double(by + boxHeight), frame)
        canvas.line(Double(bx + boxWidth), Double(by), Double(bx + boxWidth), Double(by + boxHeight), frame)
        for (i, s) in series.enumerated() {
            let cy = Double(by + 5 + rowHeight * i + rowHeight / 2)
            canvas.line(Double(bx + 12), cy, Double(bx + 12 + swatch), cy, s.color, thickness: s.thickness)
            if s.markers { canvas.dot(Double(bx + 12 + swatch / 2), cy, radius: 4, s.color) }
            canvas.text(s.name, x: bx + 12 + swatch + 10, y: Int(cy) - 7, scale: 2)
        }
    }
}
