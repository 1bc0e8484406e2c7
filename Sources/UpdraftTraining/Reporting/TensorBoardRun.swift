import Foundation
import UpdraftCore
import UpdraftModel
import UpdraftData

/// What a network training run logs for TensorBoard (`UpdateConfiguration.reporting.tensorboardDirectory`,
/// `updraft train --tensorboard DIR`). Steps count mini-batches over the whole run: mini-batch `b`
/// of epoch `e` is step `e * batchesPerEpoch + b + 1`, and an epoch's figures are logged at the step
/// of its last mini-batch. Tags:
/// - `batch/loss` each mini-batch;
/// - `train/loss` (mean over the epoch), `train/accuracy`, `validation/loss`, `validation/accuracy`,
///   `learning_rate`, `images_per_second` each epoch, as float32 scalars;
/// - `validation/confusion_matrix` each epoch, a PNG (`ConfusionMatrixPlot`) of a cross-entropy
///   classifier's validation predictions;
/// - `weights/<layer>`, `biases/<layer>` and `gradients/<layer>` (of the weights, the epoch's last step) histograms
///   of every updatable layer each epoch;
/// - `hyperparameters` and `updatable_layers` as Markdown text at the start, with the hparams
///   plugin's session start record (and its end record when the run ends).
/// A resumed run writes a new file in the same folder that starts with a `SessionLog` START at the
/// first step it logs, so TensorBoard drops what the earlier run logged after its checkpoint.
/// Only rank 0 of an MPI job logs. The event file is synced each epoch.
final class TensorBoardRun {
    let writer: TensorBoardWriter
    let batchesPerEpoch: Int
    private let session: TrainingSession

    /// A new event file in `directory` for `session`'s run of `exampleCount` examples.
    init(directory: URL, session: TrainingSession, exampleCount: Int,
         onWriteFailure: @escaping (String) -> Void) throws {
        writer = try TensorBoardWriter(directory: directory)
        writer.onWriteFailure = onWriteFailure
        let size = max(1, session.parameters.miniBatchSize)
        batchesPerEpoch = exampleCount / size + (exampleCount % size == 0 ? 0 : 1)
        self.session = session
        session.recordsConfusion = true
        switch session.graph.classLabels {
        case .strings(let names)?: classNames = names
        case .int64(let values)?: classNames = values.map { "\($0)" }
        case nil: classNames = []
        }
    }

    /// The classifier's class labels, for the confusion matrix.
    private let classNames: [String]

    private func now() -> Double { Date().timeIntervalSince1970 }

    /// The last step logged (the session end record goes there, so no step runs backwards).
    private var lastStep: Int64 = 0

    /// The global step of mini-batch `batch` (from 0) of `epoch` (from 0).
    func step(epoch: Int, batch: Int) -> Int64 { Int64(epoch * batchesPerEpoch + batch + 1) }

    private func write(step: Int64, _ values: [ProtoMessage]) {
        lastStep = max(lastStep, step)
        writer.write(record: TensorBoardEvent.summary(wallTime: now(), step: step, values))
    }

    /// Records one progress event.
    func record(_ event: UpdateProgressEvent, metrics: TrainingMetrics?, parameters: TrainingParameters,
                resumedFrom: TrainingPosition?) {
        switch event {
        case .trainingBegin: begin(parameters: parameters, resumedFrom: resumedFrom)
        case .miniBatchEnd:
            guard let m = metrics else { return }
            write(step: step(epoch: m.epochIndex, batch: m.miniBatchIndex ?? 0), [TensorBoardEvent.scalar("batch/loss", m.lossValue)])
        case .epochEnd:
            guard let m = metrics else { return }
            epochEnd(m, parameters: parameters)
        default: break
        }
    }

    private func begin(parameters: TrainingParameters, resumedFrom: TrainingPosition?) {
        let first: Int64
        if let p = resumedFrom {
            first = step(epoch: p.epoch, batch: p.miniBatch)
            writer.write(record: TensorBoardEvent.sessionStart(wallTime: now(), step: first,
                                                               message: "resumed at epoch \(p.epoch + 1) mini-batch \(p.miniBatch + 1)"))
        } else {
            first = 0
        }
        let hparams = Self.hparams(parameters)
        let table = ["| hyperparameter | value |", "|---|---|"] + hparams.map { name, value -> String in
            switch value {
            case .number(let x): return "| \(name) | \(x.rounded() == x && abs(x) < 1e15 ? String(Int64(x)) : "\(x)") |"
            case .string(let s): return "| \(name) | \(s) |"
            case .bool(let b): return "| \(name) | \(b) |"
            }
        }
        let layers = ["| layer | op | weights | bias | parameters |", "|---|---|---|---|---|"] + session.graph.updatableLayers.map {
            "| \($0.name) | \($0.op.name) | \($0.weights.map { "\($0.shape)" } ?? "-") | \($0.bias.map { "\($0.shape)" } ?? "-") | \($0.parameterCount) |"
        }
        write(step: first, [
            TensorBoardEvent.text("hyperparameters", markdown: table.joined(separator: "\n")),
            TensorBoardEvent.text("updatable_layers", markdown: layers.joined(separator: "\n")),
            TensorBoardEvent.sessionStartInfo(hparams, group: "", startTime: now())])
        writer.flush()
    }

    /// The run's hyperparameters for the hparams plugin: the optimizer and each parameter's value, by name.
    static func hparams(_ parameters: TrainingParameters) -> [(String, TensorBoardEvent.HParam)] {
        [("optimizer", .string(parameters.optimizer.rawValue))] + parameters.values.map { key, value in
            switch value {
            case .bool(let b): return (key.rawValue, TensorBoardEvent.HParam.bool(b))
            default: return (key.rawValue, .number(value.doubleValue ?? 0))
            }
        }.sorted { $0.0 < $1.0 }
    }

    private func epochEnd(_ m: TrainingMetrics, parameters: TrainingParameters) {
        var values: [ProtoMessage] = []
        if let v = m.meanLoss { values.append(TensorBoardEvent.scalar("train/loss", v)) }
        if let v = m.trainingAccuracy { values.append(TensorBoardEvent.scalar("train/accuracy", v)) }
        if let v = m.validationLoss { values.append(TensorBoardEvent.scalar("validation/loss", v)) }
        if let v = m.validationAccuracy { values.append(TensorBoardEvent.scalar("validation/accuracy", v)) }
        values.append(TensorBoardEvent.scalar("learning_rate", parameters.learningRate))
        if let v = m.examplesPerSecond { values.append(TensorBoardEvent.scalar("images_per_second", v)) }
        if m.validationLoss != nil, let counts = session.validationConfusion {
            let canvas = ConfusionMatrixPlot(counts: counts, labels: classNames).render()
            if let png = try? canvas.png() {
                values.append(TensorBoardEvent.image("validation/confusion_matrix", png: png, width: canvas.width, height: canvas.height, channels: 3))
            }
        }
        for layer in session.graph.updatableLayers {
            // A layer that cannot be read back is left out of the histograms; training is not affected.
            if let (w, b) = try? session.weights(ofLayer: layer.name) {
                values.append(TensorBoardEvent.histogram("weights/\(layer.name)", w.data))
                if let b { values.append(TensorBoardEvent.histogram("biases/\(layer.name)", b.data)) }
            }
            if let g = try? session.executor.gradients(ofLayer: layer.name) {
                values.append(TensorBoardEvent.histogram("gradients/\(layer.name)", g.weights))
            }
        }
        write(step: step(epoch: m.epochIndex, batch: batchesPerEpoch - 1), values)
        writer.flush()
    }

    /// The hparams plugin's session end record: success for a completed run, failure for a failed
    /// one, and still running for a cancelled one (it may be resumed).
    func end(_ state: UpdateTaskState) {
        let status: TensorBoardEvent.SessionStatus = state == .completed ? .success : state == .failed ? .failure : .running
        write(step: lastStep, [TensorBoardEvent.sessionEndInfo(status, endTime: now())])
        writer.flush()
    }
}
