import Foundation
import Updraft
import UpdraftCommandLine

let evaluateCommand = CLICommand(CommandSpec(
    name: "evaluate",
    summary: "Loss, accuracy and confusion matrix of a model on a folder of labelled data.",
    positionals: "MODEL.mlmodel", minPositionals: 1, maxPositionals: 1,
    options: OptionSpec.table("""
        --data DIR         one subfolder per class (images), a labels .csv, or inputs.npy + labels.txt or targets.npy
        --batch-size N     examples per forward pass (default 32)
        --skip-unreadable  skip images that fail to decode, with a warning
        --json             print JSON
        --report DIR       also write confusion.png, mistakes.png (the worst mistakes) and report.json into DIR
        """) + [neighborsOption, unknownDistanceOption] + imageDataOptionSpecs + computeOptions
)) { args in
    guard let dataPath = args.value("data") else { throw UsageError("--data DIR is required") }
    let model = try CoreMLModel(contentsOf: URL(fileURLWithPath: args.positionals[0]))
    var dataOptions = try imageDataOptions(args, input: model.inputImage.map { ($0.width, $0.height) })
    dataOptions.skipUnreadable = args.flag("skip-unreadable")
    let data = try ModelDataset(model: model, path: URL(fileURLWithPath: dataPath), options: dataOptions)
    data.warnings.forEach { printError("warning: \($0)") }
    let requested = try args.int("batch-size") ?? 32
    guard requested > 0 else { throw UsageError("--batch-size must be at least 1, got \(requested)") }
    // A batch never holds more examples than there are.
    let batch = min(requested, max(1, data.provider.count))
    // The model's kind runs it, where the scheduler places it within --compute-units / --device.
    var config = UpdateConfiguration()
    try computeConfiguration(args, dataParallel: false, into: &config)
    try neighborsConfiguration(args, into: &config)
    config.placement.job = Scheduler.Job(examples: data.provider.count)
    let predictor = try ModelKinds.predictor(model: model, configuration: config, batchSize: batch, batchSource: "--batch-size",
                                             warn: { printError("warning: \($0)") })
    try predictor.checkMemory(batchSize: batch, work: .evaluation)
    let provider = data.provider
    reportPreparation(predictor.prepare(batchSize: max(1, min(batch, provider.count)), work: .evaluation))
    let batches = stride(from: 0, to: provider.count, by: batch).map { $0..<min($0 + batch, provider.count) }
    func position(_ range: Range<Int>) -> String { "examples \(range.lowerBound + 1)-\(range.upperBound)" }
    guard let labels = predictor.classLabels else {
        // A regressor: the loss is all there is.
        var sum = 0.0, n = 0
        for range in batches {
            let r = try predictor.loss(provider, range: range, position: position(range))
            sum += r.loss * Double(r.count); n += r.count
        }
        let loss = sum / Double(max(1, n))
        if args.flag("json") { print(#"{"examples":\#(n),"loss":\#(loss)}"#) } else { print("examples: \(n)\nloss: \(loss)") }
        return 0
    }
    let result = try ClassifierEvaluation.run(predictor, on: provider, batchSize: batch, neighbors: args.value("report") != nil)
    let (confusion, loss, accuracy, n) = (result.confusion, result.loss, result.accuracy, result.examples)
    let correct = confusion.indices.reduce(0) { $0 + confusion[$1][$1] }
    if let folder = args.value("report") {
        let files = try result.write(to: URL(fileURLWithPath: folder), data: provider)
        printError("wrote \(files.map(\.lastPathComponent).joined(separator: ", ")) into \(folder) (\(result.mistakes.count) mistakes)")
    }
    if args.flag("json") {
        let obj: [String: Any] = ["examples": n, "loss": loss, "accuracy": accuracy, "labels": labels, "confusion": confusion,
                                  "device": predictor.deviceName]
        print(String(decoding: try JSONSerialization.data(withJSONObject: obj, options: [.sortedKeys]), as: UTF8.self))
        return 0
    }
    print("examples: \(n) (\(data.summary))")
    print("device: \(predictor.deviceName)")
    print(String(format: "loss: %.4f\naccuracy: %.2f%% (%d of %d)", loss, accuracy * 100, correct, n))
    print("\nconfusion matrix (rows: true label, columns: predicted):")
    var rows = [["true\\pred"] + labels]
    for (i, r) in confusion.enumerated() { rows.append([labels[i]] + r.map(String.init)) }
    print(formatTable(rows, rightAligned: Set(1...labels.count)), terminator: "")
    return 0
}
