import Foundation
import UpdraftCore
import UpdraftBackends
import UpdraftModel
import UpdraftPlacement
import UpdraftData

/// Exact k-nearest-neighbors search and voting over a k-NN classifier's samples, on the host.
///
/// The rules, where Core ML documents none (the README's "k-NN" section states them):
/// - distances are squared Euclidean (the model's only distance), accumulated in Double; the
///   neighbours are the k samples of smallest distance, a tie broken by the lower sample index;
///   k larger than the number of samples takes them all; an empty index predicts the default label
///   with probability 1;
/// - uniform weighting gives each neighbour one vote; inverse-distance weighting gives it
///   1 / Euclidean distance (scikit-learn's `weights="distance"`), and when some neighbours are at
///   distance 0 only they vote, one vote each;
/// - a label's probability is its votes over all votes; the predicted label is the most probable,
///   a tie going to the label whose nearest neighbour is nearest;
/// - with `unknownDistance` (Updraft's, not Core ML's): when the nearest sample is farther than it
///   (Euclidean distance), the answer is the default label with probability 1, as for an empty index,
///   and the neighbours are still reported.
public struct NearestNeighbors: Sendable {
    /// One neighbour of a query.
    public struct Neighbor: Hashable, Sendable {
        /// The sample's index in the model.
        public var sample: Int
        /// Its label's index in `labels`.
        public var label: Int
        /// The squared Euclidean distance to the query.
        public var squaredDistance: Double
    }

    /// The answer for one query.
    public struct Answer: Sendable {
        /// Per label of `labels`, the share of the votes (summing to 1).
        public var probabilities: [Double]
        /// The predicted label's index in `labels`.
        public var label: Int
        /// The neighbours that voted, nearest first (empty for an empty index).
        public var neighbors: [Neighbor]
        /// Whether the nearest sample was farther than `unknownDistance`, so the default label answered.
        public var isUnknown = false
    }

    /// The labels answers are given in (`KNearestNeighborsSpec.distinctClassLabels`).
    public let labels: ClassLabels
    /// Each sample's dimension.
    public let dimension: Int
    /// How many samples are stored.
    public let count: Int
    /// k.
    public let k: Int
    /// The model's weighting.
    public let weighting: KNearestNeighborsSpec.Weighting
    /// The Euclidean distance past which the nearest sample does not count: the default label answers.
    public let unknownDistance: Double?
    /// The index searched: the exact linear scan, or a kd-tree when the model asks for one.
    private let engine: Engine
    private let sampleLabels: [Int]
    private let defaultLabel: Int

    /// The search over `spec`'s samples with `k` neighbours (the model's default when nil, else
    /// checked against the model's allowed values), answering the default label when the nearest
    /// sample is farther than `unknownDistance` (Euclidean).
    /// - Throws: `.invalidModel` when the model has no labels, no k, or samples that do not match its
    ///   dimension or label count (what `KNearestNeighborsValidator` reports); `.invalidArgument` for
    ///   a k outside the allowed values, or an `unknownDistance` that is negative, not finite, or set
    ///   for a model without a default label.
    public init(_ spec: KNearestNeighborsSpec, k: Int? = nil, unknownDistance: Double? = nil) throws {
        if let k { try spec.checkNumberOfNeighbors(k) }
        if let u = unknownDistance {
            guard u.isFinite, u >= 0 else {
                throw UpdraftError(.invalidArgument, "the unknown distance is \(u); it must be a finite distance, 0 or more", hint: "give --unknown-distance D with D >= 0")
            }
            guard spec.defaultLabel != nil else {
                throw UpdraftError(.invalidArgument, "the k-NN has no default label to answer with past the unknown distance",
                                   hint: "give the model a default label (coremltools: default_class_label), or leave out --unknown-distance")
            }
        }
        self.unknownDistance = unknownDistance
        guard let labels = spec.distinctClassLabels else {
            throw UpdraftError(.invalidModel, "the k-NN has neither samples' labels nor a default label", hint: "`updraft inspect` lists what it lacks")
        }
        let sampleLabels = spec.labels?.asStrings ?? []
        guard sampleLabels.count == spec.samples.count, spec.samples.allSatisfy({ $0.count == Int(spec.dimension) }) else {
            throw UpdraftError(.invalidModel, "the k-NN's \(spec.samples.count) samples and \(sampleLabels.count) labels do not match each other or its dimension \(spec.dimension)",
                               hint: "`updraft inspect` lists the problems")
        }
        let chosen = k ?? spec.numberOfNeighbors.map { Int(clamping: $0.defaultValue) } ?? 0
        guard chosen >= 1 else { throw UpdraftError(.invalidModel, "the k-NN's numberOfNeighbors is \(chosen); it must be at least 1") }
        let text = labels.asStrings
        let index = Dictionary(text.enumerated().map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
        self.labels = labels
        dimension = Int(spec.dimension)
        count = spec.samples.count
        self.k = chosen
        weighting = spec.weighting ?? .uniform
        let flat = spec.samples.flatMap { $0 }
        if case let .kdTree(leafSize)? = spec.index, leafSize >= 1, !flat.isEmpty {
            engine = .kdTree(KDTree(samples: flat, dimension: max(1, dimension), leafSize: Int(leafSize)))
        } else {
            engine = .linear(NeighborSearch(samples: flat, dimension: max(1, dimension)))
        }
        self.sampleLabels = sampleLabels.map { index[$0]! }
        defaultLabel = spec.defaultLabel.flatMap { index[$0.text] } ?? 0
    }

    private enum Engine {
        case linear(NeighborSearch)
        case kdTree(KDTree)
    }

    /// The k nearest samples to `query` (`dimension` values), nearest first: the plain loop's
    /// answer (Double distances, ties to the lower index), found by `NeighborSearch` or `KDTree`.
    public func neighbors(of query: ArraySlice<Float>) -> [Neighbor] {
        precondition(query.count == dimension, "a query of \(query.count) values for \(dimension)-dimensional samples")
        return neighbors(ofEach: query)[0]
    }

    /// The k nearest samples of each query in `queries` (whole rows of `dimension` values): one
    /// batched search (SGEMM) for the linear index.
    public func neighbors(ofEach queries: ArraySlice<Float>) -> [[Neighbor]] {
        let rows = queries.count / max(1, dimension)
        let found: [[NeighborMatch]]
        switch engine {
        case let .linear(search): found = search.search(Array(queries), k: k)
        case let .kdTree(tree):
            let base = queries.startIndex
            found = (0..<rows).map { tree.search(Array(queries[base + $0 * dimension..<base + ($0 + 1) * dimension]), k: k) }
        }
        return found.map { $0.map { Neighbor(sample: $0.sample, label: sampleLabels[$0.sample], squaredDistance: $0.squaredDistance) } }
    }

    /// Runs the distance products of batches of queries on `backend` (the linear index; a kd-tree
    /// searches on the host). See `NeighborSearch.attach`.
    public func runBatches(on backend: Backend) throws {
        if case let .linear(search) = engine { try search.attach(backend) }
    }

    /// Where batches of queries are searched ("cpu", or the attached device while it serves).
    public var deviceName: String {
        if case let .linear(search) = engine { return search.deviceName }
        return "cpu"
    }

    /// Why an attached device was dropped, once it failed (the search went on on the host).
    public var deviceFailure: String? {
        if case let .linear(search) = engine { return search.deviceFailure }
        return nil
    }

    /// The answers for each query in `queries` (whole rows of `dimension` values).
    public func answers(_ queries: ArraySlice<Float>) -> [Answer] { neighbors(ofEach: queries).map(answer(neighbors:)) }

    /// The vote of `query`'s neighbours.
    public func answer(_ query: ArraySlice<Float>) -> Answer { answer(neighbors: neighbors(of: query)) }

    /// The vote of `near`, a query's neighbours, nearest first.
    func answer(neighbors near: [Neighbor]) -> Answer {
        var votes = [Double](repeating: 0, count: labels.count)
        guard !near.isEmpty else {
            votes[defaultLabel] = 1
            return Answer(probabilities: votes, label: defaultLabel, neighbors: [])
        }
        if let u = unknownDistance, near[0].squaredDistance.squareRoot() > u {
            votes[defaultLabel] = 1
            return Answer(probabilities: votes, label: defaultLabel, neighbors: near, isUnknown: true)
        }
        // Inverse-distance weighting: samples at distance 0 (infinite weight) vote alone, one vote each.
        // Uniform weighting: every neighbour votes once, at any distance.
        let exact = weighting == .inverseDistance ? near.filter { $0.squaredDistance == 0 } : []
        for n in exact.isEmpty ? near : exact {
            votes[n.label] += weighting == .inverseDistance && exact.isEmpty ? 1 / n.squaredDistance.squareRoot() : 1
        }
        let total = votes.reduce(0, +)
        let probabilities = votes.map { $0 / total }
        let top = probabilities.max()!
        // Among the most probable labels, the one with the nearest neighbour (neighbours are nearest first).
        let label = near.first { probabilities[$0.label] == top }!.label
        return Answer(probabilities: probabilities, label: label, neighbors: near)
    }
}

/// A k-NN classifier run forward on the host: each example's input flattened to the model's
/// dimension, answered by `NearestNeighbors`.
final class NearestNeighborsPredictor: ModelPredictor {
    let search: NearestNeighbors
    var deviceName: String { search.deviceName }
    var classLabels: [String]? { search.labels.asStrings }

    private let warn: (String) -> Void
    private var warnedFailure = false

    /// - Parameter device: where batches' distance products run (`NearestNeighborsDevice.choose`); nil: the host.
    init(model: CoreMLModel, k: Int? = nil, unknownDistance: Double? = nil, device: Backend? = nil,
         warn: @escaping (String) -> Void = { _ in }) throws {
        guard case let .kNearestNeighbors(spec) = model.spec.body else {
            throw UpdraftError(.invalidModel, "this model is a \(model.spec.modelType.name), not a k-nearest-neighbors classifier")
        }
        search = try NearestNeighbors(spec, k: k, unknownDistance: unknownDistance)
        self.warn = warn
        if let device {
            do { try search.runBatches(on: device) } catch {
                warn("cannot hold the k-NN's samples on \(device.name): \(firstLine(of: error)); searching on the CPU")
            }
        }
    }

    func checkMemory(batchSize: Int, work: MemoryPreflight.Work) throws {}

    /// The probabilities `[n, labels]` of the `n` examples of `inputs` (each `dimension` values).
    func probabilities(_ inputs: Tensor) throws -> Tensor {
        let d = search.dimension
        let n = inputs.shape.dims.first ?? 0
        guard n * d == inputs.count else {
            throw UpdraftError(.invalidArgument, "the k-NN takes vectors of \(d) values; the inputs \(inputs.shape) hold \(inputs.count / max(n, 1)) per example",
                               hint: "give inputs of the model's input shape")
        }
        var out: [Float] = []
        out.reserveCapacity(n * search.labels.count)
        for a in search.answers(inputs.data[0..<n * d]) { out += a.probabilities.map(Float.init) }
        if let failure = search.deviceFailure, !warnedFailure {
            warnedFailure = true
            warn(failure)
        }
        return Tensor(shape: Shape([n, search.labels.count]), data: out)
    }

    func classify(_ data: BatchProvider, range: Range<Int>, position: String) throws
        -> (probabilities: Tensor, targets: [TrainingExample.Target]) {
        let b = try data.batch(at: range)
        return (try probabilities(b.inputs), b.targets)
    }

    /// The last single input answered and its answer, so `neighbors` after `classify` on the same
    /// input (what `updraft predict` asks) searches once.
    private var lastAnswer: (query: [Float], answer: NearestNeighbors.Answer)?

    func classify(_ input: Tensor, position: String) throws -> Tensor {
        try answer(input).probabilities.withUnsafeBufferPointer { p in Tensor(shape: Shape([1, p.count]), data: p.map(Float.init)) }
    }

    private func answer(_ input: Tensor) throws -> NearestNeighbors.Answer {
        guard input.count == search.dimension else {
            throw UpdraftError(.invalidArgument, "the k-NN takes vectors of \(search.dimension) values; this input holds \(input.count)",
                               hint: "give inputs of the model's input shape")
        }
        if let lastAnswer, lastAnswer.query == input.data { return lastAnswer.answer }
        let a = search.answer(input.data[...])
        lastAnswer = (input.data, a)
        return a
    }

    func neighbors(_ input: Tensor, position: String) throws -> [PredictedNeighbor]? {
        let labels = search.labels.asStrings
        return try answer(input).neighbors.map {
            PredictedNeighbor(sample: $0.sample, label: labels[$0.label], distance: $0.squaredDistance.squareRoot())
        }
    }

    /// The mean cross-entropy of the votes against the examples' labels (a label no vote went to costs -log 1e-12).
    func loss(_ data: BatchProvider, range: Range<Int>, position: String) throws -> (loss: Double, count: Int) {
        let (p, targets) = try classify(data, range: range, position: position)
        return (crossEntropy(p, targets), targets.count)
    }
}
