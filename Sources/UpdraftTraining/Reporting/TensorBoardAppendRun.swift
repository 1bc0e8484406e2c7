import Foundation
import UpdraftCore
import UpdraftModel
import UpdraftData

/// What a run logs for TensorBoard, whatever the model kind: a network's training
/// (`TensorBoardRun`) or a k-NN's append (`TensorBoardAppendRun`).
protocol TensorBoardLog: AnyObject {
    func record(_ event: UpdateProgressEvent, metrics: TrainingMetrics?, parameters: TrainingParameters, resumedFrom: TrainingPosition?)
    func end(_ state: UpdateTaskState)
}

extension TensorBoardRun: TensorBoardLog {}

/// What a k-NN update logs for TensorBoard instead of losses (it has none): at each batch
/// (step = examples appended so far) `knn/samples`, the samples stored; at the end of the pass
/// `knn/appended_per_second` and `knn/samples_per_label/<label>` for every label, and the labels with
/// their counts as Markdown text (`knn/labels`). Synced at the end of the pass.
final class TensorBoardAppendRun: TensorBoardLog {
    let writer: TensorBoardWriter
    private let session: KNearestNeighborsUpdateSession
    private var appended: Int64 = 0

    init(directory: URL, session: KNearestNeighborsUpdateSession, onWriteFailure: @escaping (String) -> Void) throws {
        writer = try TensorBoardWriter(directory: directory)
        writer.onWriteFailure = onWriteFailure
        self.session = session
    }

    private func write(_ values: [ProtoMessage]) {
        writer.write(record: TensorBoardEvent.summary(wallTime: Date().timeIntervalSince1970, step: appended, values))
    }

    func record(_ event: UpdateProgressEvent, metrics: TrainingMetrics?, parameters: TrainingParameters, resumedFrom: TrainingPosition?) {
        switch event {
        case .miniBatchEnd:
            appended = Int64(session.appendedCount)
            write([TensorBoardEvent.scalar("knn/samples", Double(session.knn.samples.count))])
        case .epochEnd:
            let perLabel = session.knn.samplesPerLabel
            var values = perLabel.map { TensorBoardEvent.scalar("knn/samples_per_label/\($0.label)", Double($0.count)) }
            if let rate = metrics?.examplesPerSecond { values.append(TensorBoardEvent.scalar("knn/appended_per_second", rate)) }
            values.append(TensorBoardEvent.text("knn/labels", markdown: "| label | samples |\n|---|---|\n"
                + perLabel.map { "| \($0.label) | \($0.count) |" }.joined(separator: "\n")))
            write(values)
            writer.flush()
        default: break
        }
    }

    func end(_ state: UpdateTaskState) { writer.flush() }
}
