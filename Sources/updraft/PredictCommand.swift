import Foundation
import Updraft
import UpdraftCommandLine

let predictCommand = CLICommand(CommandSpec(
    name: "predict",
    summary: "The top-5 labels with probabilities for each image.",
    positionals: "MODEL.mlmodel IMAGE...", minPositionals: 2, maxPositionals: nil,
    options: [OptionSpec("top", value: "K", help: "how many labels to show (default 5)"),
              OptionSpec("json", help: "print JSON Lines, one object per image")] + imageDataOptionSpecs + computeOptions
)) { args in
    let model = try CoreMLModel(contentsOf: URL(fileURLWithPath: args.positionals[0]))
    guard let image = model.inputImage else {
        throw UpdraftError(.unsupported, "predict takes images, and this model's input is not an image")
    }
    let top = try args.int("top") ?? 5
    let dataOptions = try imageDataOptions(args, input: (image.width, image.height))
    var pre = try ImagePreprocessing(image: image, scaler: nil)
    pre.resize = dataOptions.resize
    pre.filter = dataOptions.filter
    pre.dctScaling = dataOptions.dctScaling
    try pre.validate()
    // The model's kind runs it, where the scheduler places it within --compute-units / --device.
    var config = UpdateConfiguration()
    try computeConfiguration(args, dataParallel: false, into: &config)
    let predictor = try ModelKinds.predictor(model: model, configuration: config, batchSize: 1, warn: { printError("warning: \($0)") })
    guard let labels = predictor.classLabels else {
        throw UpdraftError(.unsupported, "predict shows class labels, and this model is not a classifier")
    }
    try predictor.checkMemory(batchSize: 1, work: .prediction)
    var failures = 0
    for path in args.positionals.dropFirst() {
        do {
            let decoded = try DecodedImage(contentsOfFile: path, limits: dataOptions.limits, atLeast: pre.decodeAtLeast)
            let input = pre.tensor(from: decoded)
            let probabilities = try predictor.classify(input, position: path)
            let ranked = probabilities.data.enumerated().sorted { $0.element > $1.element }.prefix(max(1, top))
            if args.flag("json") {
                let obj: [String: Any] = ["image": path, "top": ranked.map { ["label": labels[$0.offset], "probability": Double($0.element)] }]
                print(String(decoding: try JSONSerialization.data(withJSONObject: obj, options: [.sortedKeys]), as: UTF8.self))
            } else {
                print(path)
                for r in ranked {
                    print("  " + labels[r.offset].padding(toLength: max(20, labels[r.offset].count), withPad: " ", startingAt: 0)
                          + String(format: " %6.2f%%", Double(r.element) * 100))
                }
            }
        } catch {
            failures += 1
            printError("\(path): \(error)")
        }
    }
    return failures == 0 ? 0 : 1
}
