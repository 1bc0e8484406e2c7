import Foundation
import Updraft

let model = try CoreMLModel(contentsOf: URL(fileURLWithPath: "SqueezeNet.mlmodel"))
let data = try ModelDataset(model: model, path: URL(fileURLWithPath: "train")).provider
var config = UpdateConfiguration()
config.placement.computeUnits = .all   // as MLModelConfiguration.computeUnits: the scheduler picks the devices
config.parameters = [.learningRate: .double(0.01), .epochs: .int(10)]
let task = UpdateTask(model: model, trainingData: data, configuration: config, handlers: UpdateHandlers(
    events: [.epochEnd],
    progress: { context in
        guard let metrics = context.metrics else { return }
        print("epoch \(metrics.epochIndex + 1): loss \(metrics.meanLoss ?? metrics.lossValue) on \(metrics.device ?? "?")")
        // Anneal the learning rate once an epoch, as with Core ML's resume(withParameters:).
        do {
            try context.task.resume(withParameters: [.learningRate: .double(context.parameters.learningRate * 0.9)])
        } catch {
            print("learning rate unchanged: \(error)")   // e.g. outside the model's allowed range
        }
    },
    completion: { context in
        if let error = context.error { print("training failed: \(error)"); return }
        do { try context.task.write(to: URL(fileURLWithPath: "Trained.mlmodel")) } catch { print("cannot save: \(error)") }
    }))
task.resume()   // trains on a background thread; task.cancel() still delivers the model trained so far
task.wait()
