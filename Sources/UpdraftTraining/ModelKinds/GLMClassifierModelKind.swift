import Foundation
import UpdraftCore
import UpdraftModel
import UpdraftChecks
import UpdraftPlacement
import UpdraftData

/// The GLM classifier kind (Model field 400): what coremltools writes for scikit-learn's logistic
/// regression. Read and written back byte for byte, checked by `GLMClassifierValidator`, run on the
/// host in Double (`GLMClassifierPredictor`), and, past Core ML, which cannot update it, trained by SGD
/// on the log loss (`GLMClassifierUpdateSession`, GLMClassifierUpdate.swift). Its work is a dot product
/// per class: it runs on the host CPU whatever the compute units, and says so in `updraft plan`.
enum GLMClassifierModelKind: UpdatableModelKind {
    static let name = "GLM classifier"
    static let modelTypes: [CoreMLModelType] = [.glmClassifier]

    static func validate(_ model: CoreMLModel, forUpdate: Bool) -> [ModelFinding] {
        guard let glm = model.spec.glmClassifier else { return [] }
        return GLMClassifierValidator.validate(model.spec, glm)
    }

    static func report(_ model: CoreMLModel, file: String?) -> ModelReport { ModelReport(glmClassifier: model, file: file) }

    // `resolve` and `makeSession`: GLMClassifierUpdate.swift.

    static func plannedNetwork(_ model: CoreMLModel) throws -> (network: CoreMLModel?, note: String?) {
        (nil, model.spec.glmClassifier.map {
            "GLM classifier: \($0.weights.count) rows over \($0.inputDimension) inputs, run and trained on the host CPU; no device plan"
        })
    }

    static func makePredictor(model: CoreMLModel, configuration: UpdateConfiguration, batchSize: Int, batchSource: String,
                              environment: [String: String], warn: @escaping (String) -> Void) throws -> any ModelPredictor {
        try throwFirstError(validate(model, forUpdate: false), doing: "run")
        return GLMClassifierPredictor(glm: model.spec.glmClassifier!)
    }
}

/// A GLM classifier run forward on the host, in Double: the class probabilities of Core ML's rule
/// (`GLMClassifierSpec.probabilities`).
final class GLMClassifierPredictor: ModelPredictor {
    let glm: GLMClassifierSpec
    var deviceName: String { "cpu" }
    var classLabels: [String]? { glm.labels?.asStrings }

    init(glm: GLMClassifierSpec) { self.glm = glm }

    func checkMemory(batchSize: Int, work: MemoryPreflight.Work) throws {}

    /// The probabilities `[n, classes]` of the `n` vectors in `inputs` (any shape of `n * D` values).
    func probabilities(_ inputs: Tensor) throws -> Tensor {
        let d = glm.inputDimension
        guard d > 0, inputs.count % d == 0 else {
            throw UpdraftError(.invalidArgument, "the GLM classifier takes vectors of \(d) values; the input holds \(inputs.count)",
                               hint: "give inputs of the model's input shape")
        }
        let x = inputs.data.map(Double.init), n = inputs.count / d
        let rows = (0..<n).map { glm.probabilities(x[$0 * d..<($0 + 1) * d]) }
        return Tensor(shape: Shape([n, rows.first?.count ?? 0]), data: rows.joined().map(Float.init))
    }

    func classify(_ data: BatchProvider, range: Range<Int>, position: String) throws
        -> (probabilities: Tensor, targets: [TrainingExample.Target]) {
        let b = try data.batch(at: range)
        return (try probabilities(b.inputs), b.targets)
    }

    func classify(_ input: Tensor, position: String) throws -> Tensor {
        guard input.count == glm.inputDimension else {
            throw UpdraftError(.invalidArgument, "the GLM classifier takes vectors of \(glm.inputDimension) values; this input holds \(input.count)",
                               hint: "give inputs of the model's input shape")
        }
        return try probabilities(input)
    }

    /// The mean cross-entropy of the probabilities against the examples' labels.
    func loss(_ data: BatchProvider, range: Range<Int>, position: String) throws -> (loss: Double, count: Int) {
        let (p, targets) = try classify(data, range: range, position: position)
        return (crossEntropy(p, targets), targets.count)
    }
}
