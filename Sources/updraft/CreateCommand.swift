import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft create squeezenet --classes N ... --out FILE.mlmodel`: an updatable model to fine-tune.
let createCommand = CLICommand(
    CommandSpec(
        name: "create",
        summary: "Create an updatable Core ML model (SqueezeNet 1.1) with fresh weights",
        positionals: "squeezenet", minPositionals: 1, maxPositionals: 1,
        options: [
            OptionSpec("classes", value: "N", help: "number of classes (labels \"0\"...\"N-1\" unless --labels)"),
            OptionSpec("labels", value: "A,B,...", help: "class labels, comma-separated"),
            OptionSpec("updatable", value: "LAYERS", help: "layers to make updatable (default conv10,fullyconnected0; all: every layer)"),
            OptionSpec("seed", value: "S", help: "seed of the initial weights and the shuffle seed (default 0)"),
            OptionSpec("input-size", value: "PIXELS", help: "input image side (default 227)"),
            OptionSpec("frozen-from", value: "MODEL", help: "frozen layers take their weights from MODEL (transfer learning)"),
            OptionSpec("out", value: "FILE.mlmodel", help: "where to write the model (required)"),
            OptionSpec("sidecar", value: "FILE.json", help: "also write a JSON summary of the weights (for interop checks)"),
        ],
        discussion: """
        SqueezeNet 1.1 (torchvision layout, Caffe layer names): a 227x227 RGB image scaled by 1/255,
        fire modules, conv10 and a fullyconnected0 head to N classes with softmax; a classifier with
        outputs 'label' and 'labelProbability'. Kaiming-uniform weights from --seed, cross-entropy
        loss, SGD (learning rate 0.001 in [1e-6, 1], mini-batch 8 of {1, 2, 8, 16, 32, 64}, momentum 0
        in [0, 1]), 10 epochs of {1, 10, 50}, shuffle on.

        Transfer learning: train a SqueezeNet with every layer updatable on one task, then create
        one for other labels with --frozen-from THAT.mlmodel: the layers it keeps frozen take the
        trained weights (same input size), and only the updatable head starts fresh.
        """),
    run: { args in
        guard args.positionals[0] == "squeezenet" else {
            throw UsageError("unknown model '\(args.positionals[0])'; the model Updraft creates is 'squeezenet'")
        }
        guard let out = args.value("out") else { throw UsageError("missing --out FILE.mlmodel") }
        var labels: [String]
        if let list = args.value("labels") {
            labels = list.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            if let n = try args.int("classes"), n != labels.count {
                throw UsageError("--classes \(n) does not match the \(labels.count) labels given")
            }
            if labels.contains(where: \.isEmpty) { throw UsageError("--labels contains an empty label") }
        } else {
            guard let n = try args.int("classes") else { throw UsageError("missing --classes N (or --labels)") }
            guard n >= 2, n <= 100_000 else { throw UsageError("--classes must be in 2...100000, got \(n)") }
            labels = (0..<n).map(String.init)
        }
        var options = SqueezeNet.Options(labels: labels)
        if let u = args.value("updatable") {
            options.updatableLayers = u.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            if options.updatableLayers == ["all"] {
                // Every convolution and the classifier: train the whole network (through the concats).
                options.updatableLayers = try SqueezeNet.build(SqueezeNet.Options(labels: labels)).weightedLayerNames
            }
        }
        if let s = args.value("seed") {
            guard let seed = UInt64(s) else { throw UsageError("--seed expects a non-negative integer, got '\(s)'") }
            options.seed = seed
        }
        if let size = try args.int("input-size") { options.inputSize = size }
        if let source = args.value("frozen-from") { options.frozenWeightsFrom = try CoreMLModel(contentsOf: URL(fileURLWithPath: source)) }

        let model = try SqueezeNet.build(options)
        let findings = ModelKinds.validate(model)
        let url = URL(fileURLWithPath: out)
        try model.write(to: url)
        if let sidecar = args.value("sidecar") { try InteropSidecar.write(for: model, to: URL(fileURLWithPath: sidecar)) }
        let parameters = model.layers.reduce(0) { $0 + $1.parameterCount }
        print("wrote \(out): SqueezeNet 1.1, \(labels.count) classes, \(parameters) parameters, updatable: \(model.updatableLayerNames.joined(separator: ", "))")
        for f in findings { print("  \(f)") }
        return findings.contains { $0.severity == .error } ? 1 : 0
    })
