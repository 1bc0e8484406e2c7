import Foundation
import UpdraftCore
import UpdraftModel
import UpdraftChecks
import UpdraftData

/// The k-nearest-neighbors classifier kind (Model field 404): read, written back byte for byte,
/// checked by `KNearestNeighborsValidator`, shown by `updraft inspect`, and run by exact search on
/// the host (`evaluate`, `ModelKinds.predictor`), updated by appending samples
/// (`KNearestNeighborsUpdateSession`, ModelKinds/KNearestNeighborsUpdate.swift).
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

    static func plannedNetwork(_ model: CoreMLModel) throws -> (network: CoreMLModel?, note: String?) {
        (nil, model.kNearestNeighbors.map(searchNote))
    }

    /// Where a k-NN's work runs, for `updraft plan`.
    static func searchNote(_ knn: KNearestNeighborsSpec) -> String {
        "k-NN: \(knn.samples.count) samples of dimension \(knn.dimension) (\(knn.index?.description ?? "linear") index), "
            + "searched exactly and appended to on the host CPU; no device plan"
    }

    /// Exact search on the host (`NearestNeighbors`) with the configuration's `numberOfNeighbors`
    /// (else the model's) and `unknownDistance`, once the model passes `KNearestNeighborsValidator`
    /// (else its first error, named).
    static func makePredictor(model: CoreMLModel, configuration: UpdateConfiguration, batchSize: Int, batchSource: String,
                              environment: [String: String], warn: @escaping (String) -> Void) throws -> any ModelPredictor {
        try throwFirstError(validate(model, forUpdate: false), doing: "run")
        let work = model.kNearestNeighbors.flatMap { NearestNeighborsDevice.work($0, queries: configuration.job?.examples) }
        return try NearestNeighborsPredictor(model: model, k: configuration.numberOfNeighbors, unknownDistance: configuration.unknownDistance,
                                             device: NearestNeighborsDevice.choose(configuration, environment: environment, work: work, warn: warn),
                                             warn: warn)
    }
}

/// Throws the first error among `findings` (saying how many more there are), when there is one.
func throwFirstError(_ findings: [ModelFinding], doing what: String) throws {
    let errors = findings.errors
    guard let first = errors.first else { return }
    throw UpdraftError(.invalidModel, "the model cannot \(what): \(first.message)" + (errors.count > 1 ? " (and \(errors.count - 1) more problems)" : ""),
                       hint: first.hint ?? "`updraft inspect` lists every problem")
}

/// The error for what a kind reads but cannot do yet.
func notYet(_ what: String, kind: String = KNearestNeighborsModelKind.name) -> UpdraftError {
    UpdraftError(.unsupported, "\(what) a \(kind) is not supported yet: Updraft reads, checks and writes such models, and trains neural networks",
                 hint: "`updraft inspect` shows and checks the model")
}
