import UpdraftCore
import UpdraftModel

/// Core ML's rules for a GLM classifier (GLMClassifier.proto's validator), every problem at once: a row
/// of weights per output, all of one length, an offset per row, finite values; the reference-class
/// encoding with one row and two labels, one versus rest with a row per label or one for two; probit for binary
/// models only; the input a vector of the rows' length. Core ML cannot update a GLM: a model that says
/// it is updatable is refused (Updraft trains GLMs without the flag).
public enum GLMClassifierValidator {
    /// Every finding for the GLM `glm` inside `spec` (the Model around it), errors first in check order.
    public static func validate(_ spec: ModelSpec, _ glm: GLMClassifierSpec) -> [ValidationFinding] {
        var findings: [ValidationFinding] = []
        func error(_ m: String, hint: String? = nil) { findings.append(ValidationFinding(.error, m, hint: hint)) }
        let rows = glm.weights.count, d = glm.inputDimension, classes = glm.labels?.count

        if rows == 0 { error("the GLM classifier has no weights", hint: "convert the fitted model again with coremltools") }
        if let bad = glm.weights.firstIndex(where: { $0.count != d }) {
            error("the GLM classifier's weight rows differ in length: row 1 has \(d) values, row \(bad + 1) has \(glm.weights[bad].count)")
        } else if rows > 0 && d == 0 {
            error("the GLM classifier's weight rows are empty")
        }
        if glm.offsets.count != rows {
            error("the GLM classifier has \(glm.offsets.count) offsets for \(rows) weight rows; it needs one each")
        }
        if glm.weights.joined().contains(where: { !$0.isFinite }) || glm.offsets.contains(where: { !$0.isFinite }) {
            error("the GLM classifier's weights or offsets hold a NaN or infinite value", hint: "fit the model again on finite data")
        }
        switch (glm.encoding, classes) {
        case (_, nil): error("the GLM classifier has no class labels", hint: "a classifier needs stringClassLabels or int64ClassLabels")
        case let (.referenceClass, c?) where rows != 1 || c != 2:
            error("the reference-class encoding takes one weight row and two labels; this model has \(rows) rows and \(c) labels",
                  hint: "a model of more than two classes uses the one-versus-rest encoding")
        case let (.oneVsRest, c?) where rows != c && !glm.isBinary:
            error("the one-versus-rest encoding takes a weight row per label (or one row for two labels); this model has \(rows) rows and \(c) labels")
        default: break
        }
        if glm.transform == .probit && rows != 1 {
            error("the probit transform is for binary models (one weight row); this model has \(rows)", hint: "use the logit transform")
        }
        if spec.isUpdatable {
            error("the GLM classifier is marked updatable, which Core ML refuses for this model type",
                  hint: "clear isUpdatable: Updraft trains a GLM without it (updraft train), and Core ML then opens the written model")
        }
        findings += ModelValidator.vectorInput(spec, dimension: d, of: "GLM classifier")
        return findings
    }
}

extension ModelReport {
    /// A GLM classifier's report: its outputs, transform and encoding, and how Updraft updates it.
    public init(glmClassifier model: CoreMLModel, file: String?) {
        guard let glm = model.spec.glmClassifier else {
            self.init(model: model, file: file)
            return
        }
        let details = [
            "GLM: \(glm.weights.count) weight rows over \(glm.inputDimension) inputs, \(glm.transform) transform, \(glm.encoding) encoding",
            "update: Updraft's SGD on the log loss (Core ML cannot update this model type; the written model stays a GLM)",
        ]
        self.init(model: model, file: file, details: details, classLabels: glm.labels?.asStrings, hyperparameters: [],
                  findings: GLMClassifierValidator.validate(model.spec, glm))
        kind = "glmClassifier"
    }
}
