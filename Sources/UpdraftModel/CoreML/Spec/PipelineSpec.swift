import UpdraftCore

/// Which of Model's pipeline cases the file holds.
public enum PipelineKind: String, Hashable, Sendable {
    /// Model.pipelineClassifier (200): a pipeline whose last model is a classifier.
    case classifier = "pipelineClassifier"
    /// Model.pipelineRegressor (201).
    case regressor = "pipelineRegressor"
    /// Model.pipeline (202).
    case plain = "pipeline"

    /// The Model oneof case that holds the pipeline.
    public var modelType: CoreMLModelType {
        switch self { case .classifier: return .pipelineClassifier; case .regressor: return .pipelineRegressor; case .plain: return .pipeline }
    }
}

/// Pipeline (and the PipelineClassifier / PipelineRegressor around it, field 1): models (1), each a
/// whole Model run in order, feature names wired by name; names (2), one per model when present.
public struct PipelineSpec: Hashable, Sendable {
    /// Which Model case holds the pipeline.
    public var kind: PipelineKind
    /// The models, in the order they run.
    public var models: [ModelSpec]
    /// The models' names (empty when the file gives none; else as many as `models`, unique).
    public var names: [String]

    /// A pipeline of `models`, named by `names`.
    public init(kind: PipelineKind, models: [ModelSpec], names: [String] = []) {
        self.kind = kind; self.models = models; self.names = names
    }

    /// The name of model `i`: its entry in `names`, else "model i".
    public func name(of i: Int) -> String { i < names.count && !names[i].isEmpty ? names[i] : "model \(i)" }
}

extension PipelineSpec {
    /// Reads the message of the Model case `kind`: a Pipeline, or a PipelineClassifier/Regressor holding one in field 1.
    init(reading r: ProtoReader, kind: PipelineKind) throws {
        self.kind = kind
        let p = kind == .plain ? r : try r.messageOrEmpty(1, "pipeline")
        models = try p.messages(1, "models").map { try ModelSpec(reading: $0) }
        names = try p.strings(2, "names")
    }

    func encoded() -> ProtoMessage {
        var w = MessageWriter()
        for m in models { w.message(1, m.encoded()) }
        w.strings(2, names)
        guard kind != .plain else { return w.message }
        var outer = MessageWriter()
        outer.message(1, w.message)
        return outer.message
    }
}
