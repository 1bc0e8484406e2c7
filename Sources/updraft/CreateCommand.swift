import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft create squeezenet --classes N ... --out FILE.mlmodel`: an updatable model to fine-tune;
/// `updraft create knn --feature-extractor M.mlmodel ...`: an embedding + k-NN pipeline to personalise.
let createCommand = CLICommand(
    CommandSpec(
        name: "create",
        summary: "Create an updatable Core ML model: SqueezeNet 1.1 with fresh weights, or a k-NN on a network's embedding",
        positionals: "squeezenet|knn", minPositionals: 1, maxPositionals: 1,
        options: OptionSpec.table("""
            --classes N                   number of classes (labels "0"..."N-1" unless --labels)
            --labels A,B,...              class labels, comma-separated
            --updatable LAYERS            layers to make updatable (default conv10,fullyconnected0; all: every layer)
            --seed S                      seed of the initial weights and the shuffle seed (default 0)
            --input-size PIXELS           input image side (default 227)
            --frozen-from MODEL           frozen layers take their weights from MODEL (transfer learning)
            --feature-extractor MODEL     knn: the neural network whose embedding the k-NN searches (required)
            --layer NAME                  knn: the layer whose output is the embedding (default: what the classifier head reads)
            --neighbors K                 knn: numberOfNeighbors (required), allowed 1...1000 unless --max-neighbors
            --max-neighbors N             knn: the largest k an update may choose (default 1000)
            --weighting uniform|distance  knn: one vote each, or 1/distance (default uniform)
            --index linear|kdtree         knn: the index Core ML keeps (default linear)
            --leaf-size N                 knn: the kd-tree's leaf size (default 30)
            --l2-normalize                knn: L2-normalise the embedding (Core ML's l2normalize layer): neighbours by angle
            --default-label LABEL         knn: the answer of an empty k-NN (default unknown)
            --out FILE.mlmodel            where to write the model (required)
            --sidecar FILE.json           also write a JSON summary of the weights (for interop checks)
            """),
        discussion: """
        SqueezeNet 1.1 (torchvision layout, Caffe layer names): a 227x227 RGB image scaled by 1/255,
        fire modules, conv10 and a fullyconnected0 head to N classes with softmax; a classifier with
        outputs 'label' and 'labelProbability'. Kaiming-uniform weights from --seed, cross-entropy
        loss, SGD (learning rate 0.001 in [1e-6, 1], mini-batch 8 of {1, 2, 8, 16, 32, 64}, momentum 0
        in [0, 1]), 10 epochs of {1, 10, 50}, shuffle on.

        Transfer learning: train a SqueezeNet with every layer updatable on one task, then create
        one for other labels with --frozen-from THAT.mlmodel: the layers it keeps frozen take the
        trained weights (same input size), and only the updatable head starts fresh.

        knn: the background article's personalisation model. The feature extractor's layers up to
        the embedding (frozen, with its image input and scaler), then an empty updatable k-NN on
        that embedding with string labels, as one pipeline classifier Core ML reads. `updraft train`
        then appends one sample per example; classes it has not seen become new labels.
        """),
    run: { args in
        guard let out = args.value("out") else { throw UsageError("missing --out FILE.mlmodel") }
        switch args.positionals[0] {
        case "squeezenet": break
        case "knn": return try createNearestNeighbors(args, out: out)
        default: throw UsageError("unknown model '\(args.positionals[0])'; Updraft creates 'squeezenet' or 'knn'")
        }
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

/// `updraft create knn`: `NearestNeighborsPipeline` on the feature extractor, written atomically.
private func createNearestNeighbors(_ args: ParsedArguments, out: String) throws -> Int32 {
    guard let source = args.value("feature-extractor") else { throw UsageError("missing --feature-extractor MODEL.mlmodel") }
    guard let k = try args.int("neighbors") else { throw UsageError("missing --neighbors K") }
    let most = try args.int("max-neighbors") ?? max(1000, k)
    guard k >= 1, most >= k else { throw UsageError("--neighbors must be at least 1 and at most --max-neighbors (\(most)), got \(k)") }
    var options = NearestNeighborsPipeline(layer: args.value("layer"), neighbors: k, allowedNeighbors: 1...most,
                                           l2Normalize: args.flag("l2-normalize"), defaultLabel: args.value("default-label") ?? "unknown")
    switch args.value("weighting") ?? "uniform" {
    case "uniform": options.weighting = .uniform
    case "distance": options.weighting = .inverseDistance
    case let w: throw UsageError("--weighting is uniform or distance, got '\(w)'")
    }
    switch args.value("index") ?? "linear" {
    case "linear": options.index = .linear
    case "kdtree": options.index = .kdTree(leafSize: Int32(clamping: try args.int("leaf-size") ?? 30))
    case let i: throw UsageError("--index is linear or kdtree, got '\(i)'")
    }
    let model = try options.make(featureExtractor: CoreMLModel(contentsOf: URL(fileURLWithPath: source)))
    try model.write(to: URL(fileURLWithPath: out))
    let findings = ModelKinds.validate(model)
    let parts = try model.pipelineModels()
    guard case let .kNearestNeighbors(knn) = parts[1].spec.body else { return 1 }
    print("wrote \(out): \(parts[0].layers.count) layers of \(source) -> \(knn.dimension)-wide embedding -> k-NN (k = \(k), \(options.weighting.rawValue), \(options.index.description))")
    for f in findings { print("  \(f)") }
    return findings.contains { $0.severity == .error } ? 1 : 0
}
