import Foundation
import UpdraftCore
import UpdraftModel
import UpdraftChecks

/// The k-nearest-neighbors classifier kind (Model field 404): read, written back byte for byte,
/// checked by `KNearestNeighborsValidator`, shown by `updraft inspect`, and run by exact search on
/// the host (`evaluate`, `ModelKinds.predictor`), updated by appending samples
/// (`KNearestNeighborsUpdateSession`, Training/KNearestNeighborsUpdate.swift).
enum KNearestNeighborsModelKind: UpdatableModelKind {
    static let name = "k-nearest-neighbors classifier"
    static let modelTypes: [CoreMLModelType] = [.kNearestNeighborsClassifier]

    static func validate(_ model: CoreMLModel, forUpdate: Bool) -> [ModelFinding] {
        guard case let .kNearestNeighbors(knn) = model.spec.body else { return [] }
        return KNearestNeighborsValidator.validate(model.spec, knn)
    }

    static func report(_ model: CoreMLModel, file: String?) -> ModelReport { ModelReport(kNearestNeighbors: model, file: file) }

    static func resolve(model: CoreMLModel, configuration: UpdateConfiguration, environment: [String: String]) throws -> ResolvedRun {
        try resolveUpdate(model: model, configuration: configuration)
    }

    static func makeSession(task: UpdateTask, run: ResolvedRun) throws -> any UpdateSession {
        try KNearestNeighborsUpdateSession(task: task, run: run)
    }

    /// Exact search on the host (`NearestNeighbors`) with the configuration's `numberOfNeighbors`
    /// (else the model's) and `unknownDistance`, once the model passes `KNearestNeighborsValidator`
    /// (else its first error, named).
    static func makePredictor(model: CoreMLModel, configuration: UpdateConfiguration, batchSize: Int, batchSource: String,
                              environment: [String: String], warn: @escaping (String) -> Void) throws -> any ModelPredictor {
        guard case let .kNearestNeighbors(knn) = model.spec.body else { throw notYet("running") }
        let findings = KNearestNeighborsValidator.validate(model.spec, knn).errors
        if let first = findings.first {
            throw UpdraftError(.invalidModel, "the k-NN cannot run: \(first.message)" + (findings.count > 1 ? " (and \(findings.count - 1) more problems)" : ""),
                               hint: first.hint ?? "`updraft inspect` lists every problem")
        }
        return try NearestNeighborsPredictor(model: model, k: configuration.numberOfNeighbors, unknownDistance: configuration.unknownDistance)
    }
}

/// The pipeline kind (Model fields 200, 201, 202): its models read as their own kinds; checked as
/// Core ML checks a pipeline (`PipelineValidator`) and each model by its kind; shown with each
/// model's report. Updating and running it are refused with a named error until they are built.
enum PipelineModelKind: UpdatableModelKind {
    static let name = "pipeline"
    static let modelTypes: [CoreMLModelType] = [.pipeline, .pipelineClassifier, .pipelineRegressor]

    static func validate(_ model: CoreMLModel, forUpdate: Bool) -> [ModelFinding] {
        guard case let .pipeline(p) = model.spec.body else { return [] }
        var findings = PipelineValidator.validate(model.spec, p)
        do {
            // The last model of an updatable pipeline is the one that learns; the others only run.
            let models = try model.pipelineModels()
            for (i, m) in models.enumerated() {
                let learns = forUpdate && model.spec.isUpdatable && i == models.count - 1
                findings += ModelKinds.validate(m, forUpdate: learns).map {
                    ModelFinding($0.severity, "\(p.name(of: i)): \($0.message)", layer: $0.layer, hint: $0.hint, layers: $0.layers)
                }
            }
        } catch {
            findings.append(ModelFinding(.error, "the pipeline's models cannot be read: \(firstLine(of: error))"))
        }
        return findings
    }

    static func report(_ model: CoreMLModel, file: String?) -> ModelReport {
        guard case let .pipeline(p) = model.spec.body else { return ModelReport(model: model, file: file) }
        let models = (try? model.pipelineModels()) ?? []
        let reports = models.enumerated().map { i, m in
            var r = ModelKinds.report(m, file: p.name(of: i))
            // As part of the pipeline: only the last model of an updatable pipeline needs to be updatable.
            r.findings = ModelKinds.validate(m, forUpdate: model.spec.isUpdatable && i == models.count - 1).map(ModelReport.Finding.init)
            return r
        }
        let chain = zip(p.models.indices, p.models).map { "\(p.name(of: $0)) (\($1.modelType.name))" }.joined(separator: " -> ")
        return ModelReport(model: model, file: file, details: ["models: \(p.models.count): \(chain)"], models: reports,
                           classLabels: reports.last?.classLabels, hyperparameters: reports.last?.hyperparameters ?? [],
                           findings: validate(model, forUpdate: true))
    }

    static func resolve(model: CoreMLModel, configuration: UpdateConfiguration, environment: [String: String]) throws -> ResolvedRun {
        throw notYet("updating", kind: name)
    }

    static func makeSession(task: UpdateTask, run: ResolvedRun) throws -> any UpdateSession { throw notYet("updating", kind: name) }

    static func makePredictor(model: CoreMLModel, configuration: UpdateConfiguration, batchSize: Int, batchSource: String,
                              environment: [String: String], warn: @escaping (String) -> Void) throws -> any ModelPredictor {
        throw notYet("running", kind: name)
    }
}

/// The error for what a kind reads but cannot do yet.
private func notYet(_ what: String, kind: String = KNearestNeighborsModelKind.name) -> UpdraftError {
    UpdraftError(.unsupported, "\(what) a \(kind) is not supported yet: Updraft reads, checks and writes such models, and trains neural networks",
                 hint: "`updraft inspect` shows and checks the model")
}
