import Foundation
import Updraft
import UpdraftCommandLine

/// Prints training progress: on a terminal, a progress bar during each epoch with elapsed time, ETA
/// and images/s (off a terminal, the same as a plain line every few seconds); after each epoch a
/// table row (epoch, train loss, train accuracy, validation loss and accuracy, images/s, device).
/// Also writes every event to the JSON Lines log when one is given. Its state is touched only by
/// the training thread, which calls the handlers one at a time.
final class TrainingProgressPrinter: @unchecked Sendable {
    let epochs: Int
    let batchesPerEpoch: Int
    let device: String
    let log: JSONLinesLog?
    /// Whether the run has an optimizer to log; a k-NN update appends samples instead.
    let hasOptimizer: Bool
    let interactive = isatty(STDOUT_FILENO) != 0
    private var headerPrinted = false
    private var epochLosses: [Double] = []
    private var estimate: ProgressEstimate
    /// Off a terminal, a plain progress line at most this often (seconds), so a log shows the run moving.
    let plainInterval: Double
    private var lastPlainLine: Double

    init(epochs: Int, batchesPerEpoch: Int, batchSize: Int, device: String, log: JSONLinesLog?, hasOptimizer: Bool = true,
         plainInterval: Double = Double(ProcessInfo.processInfo.environment["UPDRAFT_PROGRESS_SECONDS"] ?? "") ?? 5) {
        self.epochs = epochs; self.batchesPerEpoch = batchesPerEpoch; self.device = device; self.log = log
        self.hasOptimizer = hasOptimizer
        self.plainInterval = plainInterval
        let now = Self.now()
        estimate = ProgressEstimate(totalBatches: epochs * batchesPerEpoch, batchSize: batchSize, start: now)
        lastPlainLine = now
    }

    private static func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

    private static let columns = ["epoch", "train loss", "train acc", "val loss", "val acc", "images/s", "device"]
    private static let widths = [7, 11, 10, 10, 9, 10, 0]

    private func row(_ cells: [String]) -> String {
        zip(cells, Self.widths).map { c, w in w == 0 ? c : String(repeating: " ", count: max(0, w - c.count)) + c }
            .joined(separator: "  ")
    }

    func handle(_ ctx: UpdateContext) {
        switch ctx.event {
        case .trainingBegin:
            var params: [String: Any] = [:]
            for (k, v) in ctx.parameters.values { params[k.rawValue] = v.doubleValue ?? (v == .bool(true)) }
            let prepared = ctx.task.preparationSeconds
            if hasOptimizer {
                var fields: [String: Any] = ["epochs": epochs, "batchesPerEpoch": batchesPerEpoch, "device": device,
                                             "optimizer": ctx.parameters.optimizer.rawValue, "parameters": params]
                fields["preparationSeconds"] = prepared
                log?.write(event: "trainingBegin", fields)
            } else {
                log?.write(event: "trainingBegin", ["epochs": epochs, "batchesPerEpoch": batchesPerEpoch, "device": device,
                                                    "update": "append", "parameters": ["miniBatchSize": ctx.parameters.miniBatchSize]])
            }
            // A first run on a device builds its programs here (OpenCL), before the first epoch: say where the time went.
            if let prepared, prepared >= 1 { print(String(format: "prepared the device in %.1f s (programs and primitives, before the first epoch)", prepared)) }
            print(row(Self.columns))
            StandardOutput.flush()
        case .miniBatchEnd:
            guard let m = ctx.metrics else { return }
            log?.write(event: "miniBatchEnd", ["epoch": m.epochIndex, "batch": m.miniBatchIndex ?? 0, "loss": m.lossValue])
            let done = (m.miniBatchIndex ?? 0) + 1
            let now = Self.now()
            estimate.record(done: m.epochIndex * batchesPerEpoch + done, at: now)
            // A k-NN update has no loss (NaN): its steps show "-".
            let loss = m.lossValue.isFinite ? String(format: "%.4f", m.lossValue) : "-"
            if interactive {
                let width = 24, filled = width * done / max(1, batchesPerEpoch)
                let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
                let line = "  epoch \(m.epochIndex + 1)/\(epochs) [\(bar)] \(done)/\(batchesPerEpoch) loss \(loss)  \(estimate.summary)"
                print("\r" + line.padding(toLength: max(line.count, 100), withPad: " ", startingAt: 0), terminator: "")
                StandardOutput.flush()
            } else if now - lastPlainLine >= plainInterval {
                // Piped or redirected (a batch job's log): a whole line every few seconds instead of a bar.
                lastPlainLine = now
                print("  epoch \(m.epochIndex + 1)/\(epochs)  batch \(done)/\(batchesPerEpoch)  loss \(loss)  \(estimate.summary)")
                StandardOutput.flush()
            }
        case .epochEnd:
            guard let m = ctx.metrics else { return }
            var fields: [String: Any] = ["epoch": m.epochIndex, "loss": m.lossValue]
            if let v = m.meanLoss { fields["meanLoss"] = v }
            if let v = m.trainingAccuracy { fields["trainingAccuracy"] = v }
            if let v = m.validationLoss { fields["validationLoss"] = v }
            if let v = m.validationAccuracy { fields["validationAccuracy"] = v }
            if let v = m.examplesPerSecond { fields["imagesPerSecond"] = v }
            if let v = m.seconds { fields["seconds"] = v }
            if let v = m.device { fields["device"] = v }
            if hasOptimizer { fields["learningRate"] = ctx.parameters.learningRate }
            log?.write(event: "epochEnd", fields)
            if interactive { print("\r" + String(repeating: " ", count: 100) + "\r", terminator: "") }
            func f(_ v: Double?, _ digits: Int = 4) -> String { v.map { String(format: "%.\(digits)f", $0) } ?? "-" }
            func pct(_ v: Double?) -> String { v.map { String(format: "%.1f%%", $0 * 100) } ?? "-" }
            print(row(["\(m.epochIndex + 1)/\(epochs)", f(m.meanLoss), pct(m.trainingAccuracy), f(m.validationLoss),
                       pct(m.validationAccuracy), f(m.examplesPerSecond, 1), m.device ?? device]))
            StandardOutput.flush()
        default:
            break
        }
    }

    /// A device that failed and the fallback taken: one line on stderr (after clearing the progress
    /// bar on a terminal), and a "warning" event in the log.
    func warn(_ message: String) {
        if interactive { print("\r" + String(repeating: " ", count: 100) + "\r", terminator: ""); StandardOutput.flush() }
        printError("warning: \(message)")
        log?.write(event: "warning", ["message": message])
    }

    func finish(state: UpdateTaskState, error: Error?) {
        if interactive { print("") }
        var fields: [String: Any] = ["state": "\(state)"]
        if let error { fields["error"] = "\(error)" }
        log?.write(event: "completion", fields)
    }
}
