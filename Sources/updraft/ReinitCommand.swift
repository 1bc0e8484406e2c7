import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft reinit MODEL.mlmodel --out OUT.mlmodel`: fresh weights for some layers of an existing model.
let reinitCommand = CLICommand(
    CommandSpec(
        name: "reinit",
        summary: "Give layers of a model fresh Kaiming-uniform weights (and zero bias) and write it",
        positionals: "MODEL.mlmodel", minPositionals: 1, maxPositionals: 1,
        options: OptionSpec.table("""
            --layers LAYERS      comma-separated layers (default: the updatable layers)
            --seed S             seed of the new weights (default 0)
            --out FILE.mlmodel   where to write the model (required; may be MODEL itself)
            --sidecar FILE.json  also write a JSON summary of the weights (for interop checks)
            """),
        discussion: """
        Resets the chosen convolution and inner-product layers, e.g. a classifier head before
        fine-tuning on new classes. Only those layers' weight fields are re-encoded (as float32);
        everything else in the file is written back byte for byte.
        """),
    run: { args in
        guard let out = args.value("out") else { throw UsageError("missing --out FILE.mlmodel") }
        var model = try CoreMLModel(contentsOf: URL(fileURLWithPath: args.positionals[0]))
        let names = args.value("layers").map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
            ?? model.updatableLayerNames
        guard !names.isEmpty else {
            throw UpdraftError(.invalidArgument, "the model has no updatable layers", hint: "name the layers with --layers")
        }
        var seed: UInt64 = 0
        if let s = args.value("seed") {
            guard let v = UInt64(s) else { throw UsageError("--seed expects a non-negative integer, got '\(s)'") }
            seed = v
        }
        var rng = SplitMix64(seed: seed)
        for name in names {
            // The current weights must be readable: their values in the file bound the new tensor's size.
            let shape = try model.weights(ofLayer: name).shape
            let fanIn = shape.dims.dropFirst().reduce(1, *)
            let bound = Float((6.0 / Double(max(1, fanIn))).squareRoot())
            let weights = Tensor(shape: shape, uniformIn: -bound...bound, seed: rng.next())
            try model.setWeights(weights, ofLayer: name)
            if let bias = try model.bias(ofLayer: name) {
                try model.setBias(Tensor(zeros: bias.shape), ofLayer: name)
            }
            // The model must give back exactly what was set.
            guard try model.weights(ofLayer: name) == weights else {
                throw UpdraftError(.invalidModel, "layer '\(name)': the weights read back differ from the weights set")
            }
        }
        try model.write(to: URL(fileURLWithPath: out))
        if let sidecar = args.value("sidecar") { try InteropSidecar.write(for: model, to: URL(fileURLWithPath: sidecar)) }
        print("wrote \(out): new weights for \(names.joined(separator: ", "))")
        return 0
    })
