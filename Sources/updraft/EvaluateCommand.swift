import Foundation
import Updraft
import UpdraftCommandLine

let evaluateCommand = CLICommand(CommandSpec(
    name: "evaluate",
    summary: "Loss, accuracy and confusion matrix of a model on a folder of labelled data.",
    positionals: "MODEL.mlmodel", minPositionals: 1, maxPositionals: 1,
    options: [
        OptionSpec("data", value: "DIR", help: "one subfolder per class (images), a labels .csv, or inputs.npy + targets.npy"),
        OptionSpec("batch-size", value: "N", help: "examples per forward pass (default 32)"),
        OptionSpec("skip-unreadable", help: "skip images that fail to decode, with a warning"),
        OptionSpec("json", help: "print JSON"),
    ] + imageDataOptionSpecs + computeOptions
)) { args in
    guard let dataPath = args.value("data") else { throw UsageError("--data DIR is required") }
    let model = try CoreMLModel(contentsOf: URL(fileURLWithPath: args.positionals[0]))
    let graph = try NetworkGraph(model: model)
    var dataOptions = try imageDataOptions(args, input: model.inputImage.map { ($0.width, $0.height) })
    dataOptions.skipUnreadable = args.flag("skip-unreadable")
    let data = try ModelDataset(model: model, path: URL(fileURLWithPath: dataPath), options: dataOptions)
    data.warnings.forEach { printError("warning: \($0)") }
    let requested = try args.int("batch-size") ?? 32
    guard requested > 0 else { throw UsageError("--batch-size must be at least 1, got \(requested)") }
    // A batch never holds more examples than there are.
    let batch = min(requested, max(1, data.provider.count))
    try SizeLimits.checkBatchSize(batch, graph: graph, source: "--batch-size")
    let choice = try chooseBackends(args, graph: graph, batchSize: batch)
    choice.warnings.forEach { printError("warning: \($0)") }
    let runner = try InferenceRunner(graph: graph, prefix: choice.backends.prefix, tail: choice.backends.tail,
                                     warn: { printError("warning: \($0)") })
    try runner.checkMemory(batchSize: batch, work: .evaluation)
    let provider = data.provider
    guard let labels = graph.classLabels?.asStrings else {
        // A regressor: the loss is all there is.
        var sum = 0.0, n = 0
        for start in stride(from: 0, to: provider.count, by: batch) {
            let b = try provider.batch(at: start..<min(start + batch, provider.count))
            let r = try runner.run(position: "examples \(start + 1)-\(start + b.targets.count)") { try $0.evaluate(b) }
            sum += r.loss * Double(r.count); n += r.count
        }
        let loss = sum / Double(max(1, n))
        if args.flag("json") { print(#"{"examples":\#(n),"loss":\#(loss)}"#) } else { print("examples: \(n)\nloss: \(loss)") }
        return 0
    }
    var confusion = [[Int]](repeating: [Int](repeating: 0, count: labels.count), count: labels.count)
    var lossSum = 0.0, correct = 0
    // Images go to the device as 8-bit samples (scaled there), other data as float tensors.
    let pixels = (provider as? PixelBatchProvider).flatMap { $0.writesPixels ? $0 : nil }
    for start in stride(from: 0, to: provider.count, by: batch) {
        let range = start..<min(start + batch, provider.count)
        let probabilities: Tensor, targets: [TrainingExample.Target]
        if let pixels {
            let b = try pixels.pixelBatch(at: range)
            targets = b.targets
            probabilities = try runner.run(position: "examples \(start + 1)-\(range.upperBound)") { try $0.predict(b) }
        } else {
            let b = try provider.batch(at: range)
            targets = b.targets
            probabilities = try runner.run(position: "examples \(start + 1)-\(range.upperBound)") { try $0.predict(b.inputs) }
        }
        let classes = probabilities.shape.itemCount
        for (i, target) in targets.enumerated() {
            guard case let .classIndex(truth) = target, truth < classes else { continue }
            let row = probabilities.data[i * classes..<(i + 1) * classes]
            let predicted = row.indices.max { row[$0] < row[$1] || (row[$0] == row[$1] && $0 > $1) }! - i * classes
            confusion[truth][predicted] += 1
            if predicted == truth { correct += 1 }
            lossSum -= log(max(Double(row[row.startIndex + truth]), 1e-12))
        }
    }
    let n = provider.count
    let loss = lossSum / Double(max(1, n)), accuracy = Double(correct) / Double(max(1, n))
    if args.flag("json") {
        let obj: [String: Any] = ["examples": n, "loss": loss, "accuracy": accuracy, "labels": labels, "confusion": confusion,
                                  "device": runner.deviceName]
        print(String(decoding: try JSONSerialization.data(withJSONObject: obj, options: [.sortedKeys]), as: UTF8.self))
        return 0
    }
    print("examples: \(n) (\(data.summary))")
    print("device: \(runner.deviceName)")
    print(String(format: "loss: %.4f\naccuracy: %.2f%% (%d of %d)", loss, accuracy * 100, correct, n))
    print("\nconfusion matrix (rows: true label, columns: predicted):")
    var rows = [["true\\pred"] + labels]
    for (i, r) in confusion.enumerated() { rows.append([labels[i]] + r.map(String.init)) }
    print(formatTable(rows, rightAligned: Set(1...labels.count)), terminator: "")
    return 0
}
