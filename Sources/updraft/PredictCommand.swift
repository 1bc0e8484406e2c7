import Foundation
import Updraft
import UpdraftCommandLine

let predictCommand = CLICommand(CommandSpec(
    name: "predict",
    summary: "The top-5 labels with probabilities for each image, or each row of an .npy of inputs.",
    positionals: "MODEL.mlmodel IMAGE...|INPUTS.npy", minPositionals: 2, maxPositionals: nil,
    options: OptionSpec.table("""
        --top K  how many labels to show (default 5)
        --json   print JSON Lines, one object per image or row (a k-NN's adds its neighbors)
        """) + [neighborsOption, unknownDistanceOption] + imageDataOptionSpecs + computeOptions,
    discussion: "An image model takes image files; a multi-array model takes .npy files of shape [N] + its input shape, "
        + "one answer per row. For a k-NN, --json lists each answer's neighbors: sample index, label and Euclidean distance."
)) { args in
    let model = try CoreMLModel(contentsOf: URL(fileURLWithPath: args.positionals[0]))
    let top = try args.int("top") ?? 5
    let dataOptions = try imageDataOptions(args, input: model.inputImage.map { ($0.width, $0.height) })
    // Each input (an image, or a row of an .npy) prepared as the model's input tensor.
    let inputs: [(name: String, key: String, load: () throws -> Tensor)]
    if let image = model.inputImage {
        var pre = try ImagePreprocessing(image: image, scaler: nil)
        pre.resize = dataOptions.resize
        pre.filter = dataOptions.filter
        pre.dctScaling = dataOptions.dctScaling
        try pre.validate()
        inputs = args.positionals.dropFirst().map { path in
            (path, "image", { pre.tensor(from: try DecodedImage(contentsOfFile: path, limits: dataOptions.limits, atLeast: pre.decodeAtLeast)) })
        }
    } else if let shape = model.inputArrayShape {
        inputs = try args.positionals.dropFirst().flatMap { try npyRows(path: $0, inputShape: shape) }
    } else {
        throw UpdraftError(.unsupported, "predict takes images or multi-arrays, and this model's input is neither")
    }
    // The model's kind runs it, where the scheduler places it within --compute-units / --device.
    var config = UpdateConfiguration()
    try computeConfiguration(args, dataParallel: false, into: &config)
    try neighborsConfiguration(args, into: &config)
    config.placement.job = Scheduler.Job(examples: inputs.count)
    let predictor = try ModelKinds.predictor(model: model, configuration: config, batchSize: 1, warn: { printError("warning: \($0)") })
    guard let labels = predictor.classLabels else {
        throw UpdraftError(.unsupported, "predict shows class labels, and this model is not a classifier")
    }
    try predictor.checkMemory(batchSize: 1, work: .prediction)
    reportPreparation(predictor.prepare(batchSize: 1, work: .prediction))
    var failures = 0
    for (name, key, load) in inputs {
        do {
            let input = try load()
            let probabilities = try predictor.classify(input, position: name)
            let ranked = probabilities.data.enumerated().sorted { $0.element > $1.element }.prefix(max(1, top))
            let neighbors = try predictor.neighbors(input, position: name)
            if args.flag("json") {
                var obj: [String: Any] = [key: name, "top": ranked.map { ["label": labels[$0.offset], "probability": Double($0.element)] },
                                          "device": predictor.deviceName]
                if let neighbors {
                    obj["neighbors"] = neighbors.map { ["sample": $0.sample, "label": $0.label, "distance": $0.distance] as [String: Any] }
                }
                print(String(decoding: try JSONSerialization.data(withJSONObject: obj, options: [.sortedKeys]), as: UTF8.self))
            } else {
                print(name)
                for r in ranked {
                    print("  " + labels[r.offset].padding(toLength: max(20, labels[r.offset].count), withPad: " ", startingAt: 0)
                          + String(format: " %6.2f%%", Double(r.element) * 100))
                }
                if let nearest = neighbors?.first {
                    print("  nearest sample \(nearest.sample) (\(nearest.label)) at distance \(String(format: "%.6g", nearest.distance))")
                }
            }
        } catch {
            failures += 1
            printError("\(name): \(error)")
        }
    }
    return failures == 0 ? 0 : 1
}

/// The rows of the `.npy` at `path` as inputs of `inputShape` ("inputs.npy[3]" names row 3).
/// - Throws: before any prediction, for a file that is not `.npy` or rows of another size.
private func npyRows(path: String, inputShape: [Int]) throws -> [(name: String, key: String, load: () throws -> Tensor)] {
    guard path.lowercased().hasSuffix(".npy") else {
        throw UsageError("this model takes multi-arrays: give .npy files of shape [N] + \(inputShape), not \(path)")
    }
    let array = try NpyArray(contentsOf: URL(fileURLWithPath: path))
    let size = inputShape.reduce(1, *)
    let values: [Float]
    switch array.values {
    case let .float(v): values = v
    case let .integer(v): values = v.map(Float.init)
    }
    let rows = array.shape.count <= 1 || array.shape.dropFirst().reduce(1, *) != size ? (array.shape == inputShape ? 1 : -1) : array.shape[0]
    guard rows >= 0, values.count == rows * size else {
        throw UpdraftError(.data, "\(path) has shape \(array.shape); the model's input is \(inputShape) (\(size) values), so give shape [N, \(inputShape.map(String.init).joined(separator: ", "))]",
                           hint: "one row per input")
    }
    return (0..<rows).map { r in
        ("\(path)[\(r)]", "input", { Tensor(shape: Shape(inputShape), data: Array(values[r * size..<(r + 1) * size])) })
    }
}
