import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft make-updatable MODEL --layers L1,L2 --out OUT`: coremltools' make_updatable and set_*,
/// without Python; on an updatable model, changes its update parameters and their allowed values.
let makeUpdatableCommand = CLICommand(
    CommandSpec(
        name: "make-updatable",
        summary: "Make a model updatable (layers, loss, optimizer, hyperparameters and their allowed values), or change those of an updatable one",
        positionals: "MODEL.mlmodel", minPositionals: 1, maxPositionals: 1,
        options: OptionSpec.table("""
            --layers L1,L2                      convolution/innerProduct layers to train (replaces the updatable set; required for a model that has none)
            --loss cross-entropy|mse            loss (default: the model's; new: cross-entropy for a classifier or a softmax output, else mse)
            --loss-input BLOB                   blob the loss reads (default: a classifier's probabilities, else the only output)
            --loss-name NAME                    loss layer name (default: the model's, else lossLayer)
            --optimizer sgd|adam                optimizer (default: the model's, else sgd)
            --learning-rate X                   default learning rate (new: 0.01)
            --allowed-learning-rate MIN..MAX    allowed learning rates (new: 0..1)
            --batch-size N                      default mini-batch size (new: 10)
            --allowed-batch-sizes A,B|MIN..MAX  allowed mini-batch sizes, a set or a range (new: the default alone)
            --momentum X                        SGD momentum (new: 0)
            --allowed-momentum MIN..MAX         allowed momentum (new: 0..1)
            --beta1 X                           Adam beta1 (new: 0.9)
            --allowed-beta1 MIN..MAX            allowed beta1 (new: 0..1)
            --beta2 X                           Adam beta2 (new: 0.999)
            --allowed-beta2 MIN..MAX            allowed beta2 (new: 0..1)
            --eps X                             Adam epsilon (new: 1e-8)
            --allowed-eps MIN..MAX              allowed epsilon (new: 0..1)
            --epochs N                          default epochs (new: 1)
            --allowed-epochs A,B|MIN..MAX       allowed epochs, a set or a range (new: the default alone)
            --shuffle on|off                    shuffle the examples every epoch (new: on)
            --seed S                            shuffle seed stored in the model (new: none, i.e. 0)
            --out FILE.mlmodel                  where to write the model (required; may be MODEL itself)
            --sidecar FILE.json                 also write a JSON summary of the weights (for interop checks)
            """),
        discussion: """
        What coremltools' NeuralNetworkBuilder.make_updatable, set_categorical_cross_entropy_loss /
        set_mean_squared_error_loss, set_sgd_optimizer / set_adam_optimizer, set_epochs and
        set_shuffle write, with the same defaults: the layers' weights flagged updatable, the model
        marked updatable (specification version 4 or later), the loss target added to the training
        inputs (a classifier's label, or LOSSINPUT_true). A classifier's softmaxND becomes the
        softmax Core ML's cross-entropy needs. On a model that is already updatable, only what is
        given changes: the way out of "epochs = 3 is not allowed by this model" is
        `updraft make-updatable M.mlmodel --allowed-epochs 1..1000 --out M.mlmodel`.
        Only the fields concerned are re-encoded; the file is written atomically.
        """),
    run: { args in
        guard let out = args.value("out") else { throw UsageError("missing --out FILE.mlmodel") }
        let path = args.positionals[0]
        let model = try CoreMLModel(contentsOf: URL(fileURLWithPath: path))
        var o = UpdatableModelOptions()
        if let list = args.value("layers") {
            o.layers = list.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            if o.layers!.contains(where: \.isEmpty) { throw UsageError("--layers contains an empty layer name") }
        }
        switch try args.choice("loss", ["cross-entropy", "mse"]) {
        case "cross-entropy"?: o.loss = .categoricalCrossEntropy
        case "mse"?: o.loss = .meanSquaredError
        default: break
        }
        o.lossInput = args.value("loss-input")
        o.lossName = args.value("loss-name")
        // Every optimizer's name is taken, so that one past Core ML (adamw) meets the library's refusal and its way out.
        if let name = try args.choice("optimizer", OptimizerKind.all.map(\.rawValue)) { o.optimizer = OptimizerKind(rawValue: name) }
        func range(_ name: String) throws -> DoubleBounds? {
            try args.value(name).map { try DoubleBounds.parse($0, what: "--\(name)") }
        }
        func allowed(_ name: String) throws -> Int64Constraint? {
            try args.value(name).map { try Int64Constraint.parse($0, what: "--\(name)") }
        }
        func int64(_ name: String) throws -> Int64? { try args.int(name).map { Int64($0) } }
        o.learningRate = try args.double("learning-rate")
        o.allowedLearningRate = try range("allowed-learning-rate")
        o.miniBatchSize = try int64("batch-size")
        o.allowedMiniBatchSizes = try allowed("allowed-batch-sizes")
        o.momentum = try args.double("momentum")
        o.allowedMomentum = try range("allowed-momentum")
        o.beta1 = try args.double("beta1")
        o.allowedBeta1 = try range("allowed-beta1")
        o.beta2 = try args.double("beta2")
        o.allowedBeta2 = try range("allowed-beta2")
        o.eps = try args.double("eps")
        o.allowedEps = try range("allowed-eps")
        o.epochs = try int64("epochs")
        o.allowedEpochs = try allowed("allowed-epochs")
        if let s = try args.choice("shuffle", ["on", "off"]) { o.shuffle = s == "on" }
        o.seed = try int64("seed")

        let updated = try model.makingUpdatable(o)
        try updated.write(to: URL(fileURLWithPath: out))
        if let sidecar = args.value("sidecar") { try InteropSidecar.write(for: updated, to: URL(fileURLWithPath: sidecar)) }

        let update = updated.updateParameters
        let loss = update?.lossLayers.first
        print("wrote \(out): updatable layers \(updated.updatableLayerNames.joined(separator: ", "))")
        if let loss {
            print("  loss \(loss.name): \(loss.kind == .meanSquaredError ? "mean squared error" : "categorical cross-entropy") on '\(loss.input)', target '\(updated.lossTargetFeature?.name ?? loss.target)'")
        }
        print("  optimizer: \(updated.optimizer.map { $0.kind.optimizerType.name } ?? "none")")
        for h in updated.hyperparameters where h.inModel {
            print("  \(h.key.rawValue): \(h.defaultValue), allowed \(h.constraint)")
        }
        let findings = ModelKinds.validate(updated)
        let errors = findings.errors.count, warnings = findings.warnings.count
        if errors + warnings > 0 {
            print("  validation: \(errors) error\(errors == 1 ? "" : "s"), \(warnings) warning\(warnings == 1 ? "" : "s") (updraft inspect \(out) lists them)")
        }
        return 0
    })
