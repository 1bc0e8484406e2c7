import Foundation
import UpdraftCore

/// Core ML's generalized linear classifier (Model field 400, GLMClassifier.proto): what coremltools
/// writes for scikit-learn's `LogisticRegression` and `LinearSVC`. Each output is an affine function of
/// the input vector, `z = w·x + b`, passed through the transform. With the reference-class encoding
/// (binary only) one row gives the second class's probability and the first class has the rest (so does
/// one versus rest with one row, as coremltools writes a binary model); one versus rest has a row per
/// class, and the classes' values are normalized to sum to 1. Core ML cannot
/// update such a model; Updraft trains it (`GLMClassifierModelKind`).
public struct GLMClassifierSpec: ModelBodyCodec {
    /// GLMClassifier.PostEvaluationTransform.
    public enum Transform: Int, Hashable, Sendable, CustomStringConvertible {
        /// 1 / (1 + e^-z).
        case logit = 0
        /// The standard normal distribution function Φ(z); binary models only.
        case probit = 1
        public var description: String { self == .logit ? "logit" : "probit" }
    }

    /// GLMClassifier.ClassEncoding.
    public enum ClassEncoding: Int, Hashable, Sendable, CustomStringConvertible {
        /// One row: the second class's probability; the first class is the reference.
        case referenceClass = 0
        /// A row per class, normalized.
        case oneVsRest = 1
        public var description: String { self == .referenceClass ? "reference class" : "one versus rest" }
    }

    /// One row of input weights per output (`weights`, field 1).
    public var weights: [[Double]]
    /// One offset per output (`offset`, field 2).
    public var offsets: [Double]
    public var transform: Transform
    public var encoding: ClassEncoding
    /// The class labels (`stringClassLabels` 100 or `int64ClassLabels` 101).
    public var labels: ClassLabels?

    public init(weights: [[Double]], offsets: [Double], transform: Transform = .logit, encoding: ClassEncoding, labels: ClassLabels?) {
        self.weights = weights; self.offsets = offsets; self.transform = transform; self.encoding = encoding; self.labels = labels
    }

    static let modelTypes: [CoreMLModelType] = [.glmClassifier]
    public var modelType: CoreMLModelType { .glmClassifier }
    public var classLabels: ClassLabels? { labels }
    /// The input vector's length (every row's, once validated).
    public var inputDimension: Int { weights.first?.count ?? 0 }
    /// One row for two classes: the row gives the second class's probability, whatever the encoding
    /// (coremltools writes a binary logistic regression as one versus rest with one row).
    public var isBinary: Bool { weights.count == 1 && (labels?.count ?? 2) == 2 }

    /// Whether example of class `c` is a positive for output `k` (its class, or the second class for a binary model).
    public func isPositive(class c: Int, output k: Int) -> Bool { isBinary ? c == 1 : c == k }

    /// The affine scores `w·x + b` of one input, a row each.
    public func scores(_ x: ArraySlice<Double>) -> [Double] {
        zip(weights, offsets).map { w, b in zip(w, x).reduce(b) { $0 + $1.0 * $1.1 } }
    }

    /// The transform of one score.
    public func transformed(_ z: Double) -> Double {
        switch transform {
        case .logit: return 1 / (1 + exp(-z))
        case .probit: return 0.5 * erfc(-z / 2.0.squareRoot())
        }
    }

    /// The class probabilities of one input, in the labels' order.
    public func probabilities(_ x: ArraySlice<Double>) -> [Double] {
        let p = scores(x).map(transformed)
        if isBinary { return [1 - p[0], p[0]] }
        let sum = p.reduce(0, +)
        return sum > 0 ? p.map { $0 / sum } : p.map { _ in 1 / Double(p.count) }
    }

    init(reading r: ProtoReader, type: CoreMLModelType) throws {
        weights = try r.messages(1, "weights").map { try $0.doubles(1, "value") }
        offsets = try r.doubles(2, "offset")
        let t = try r.int64(3, "postEvaluationTransform") ?? 0, e = try r.int64(4, "classEncoding") ?? 0
        guard let transform = Transform(rawValue: Int(t)) else {
            throw UpdraftError(.invalidModel, "the GLM classifier's postEvaluationTransform is \(t); Core ML knows 0 (Logit) and 1 (Probit)",
                               hint: "re-export the model with coremltools")
        }
        guard let encoding = ClassEncoding(rawValue: Int(e)) else {
            throw UpdraftError(.invalidModel, "the GLM classifier's classEncoding is \(e); Core ML knows 0 (ReferenceClass) and 1 (OneVsRest)",
                               hint: "re-export the model with coremltools")
        }
        self.transform = transform
        self.encoding = encoding
        switch r.lastOf([100, 101])?.number {
        case 100?: labels = .strings(try r.messageOrEmpty(100, "stringClassLabels").strings(1, "vector"))
        case 101?: labels = .int64(try r.messageOrEmpty(101, "int64ClassLabels").varints(1, "vector").map { Int64(bitPattern: $0) })
        default: labels = nil
        }
    }

    func encoded() -> ProtoMessage {
        var w = MessageWriter()
        for row in weights { w.message(1) { $0.doubles(1, row) } }
        w.doubles(2, offsets)
        w.int32(3, Int32(transform.rawValue))
        w.int32(4, Int32(encoding.rawValue))
        switch labels {
        case let .strings(s)?: w.message(100) { v in v.strings(1, s) }
        case let .int64(s)?: w.message(101) { v in v.int64s(1, s) }
        case nil: break
        }
        return w.message
    }
}

extension ModelSpec {
    /// The model's GLM classifier, if it is one.
    public var glmClassifier: GLMClassifierSpec? { body.family(as: GLMClassifierSpec.self) }
}

extension CoreMLModel {
    /// The model with its GLM classifier replaced by `glm` (what a GLM update writes); the rest of the
    /// file (description, metadata, anything Updraft does not read) is kept as it was.
    public func replacingGLMClassifier(_ glm: GLMClassifierSpec) throws -> CoreMLModel {
        guard spec.glmClassifier != nil else {
            throw UpdraftError(.invalidModel, "this model is a \(spec.modelType.name), not a GLM classifier")
        }
        var out = message
        out.set(ProtoField(number: CoreMLModelType.glmClassifier.rawValue, message: glm.encoded()))
        var newSpec = spec
        newSpec.body = .family(FamilyModelBody(glm))
        return CoreMLModel(message: out, spec: newSpec)
    }
}
