import UpdraftCore

/// KNearestNeighborsClassifier (Model field 404) and its NearestNeighborsIndex: the stored samples
/// and their labels, how many neighbours vote and how. Field numbers are NearestNeighbors.proto's
/// (see /work/shared/reference/coreml-training.md, section 2b).
public struct KNearestNeighborsSpec: Hashable, Sendable {
    /// The labels of the stored samples (the `ClassLabels` oneof: stringClassLabels 100, int64ClassLabels 101).
    public typealias Labels = ClassLabels

    /// The label predicted when no sample answers (the `DefaultClassLabel` oneof).
    public enum DefaultLabel: Hashable, Sendable {
        /// defaultStringLabel (110).
        case string(String)
        /// defaultInt64Label (111).
        case int64(Int64)

        /// The label as text (an int64 in decimal).
        public var text: String {
            switch self { case let .string(s): return s; case let .int64(v): return String(v) }
        }
    }

    /// How the neighbours' votes are weighed (the `WeightingScheme` oneof).
    public enum Weighting: String, Hashable, Sendable {
        /// uniformWeighting (200): one vote each.
        case uniform
        /// inverseDistanceWeighting (210): votes weighed by the inverse of the distance.
        case inverseDistance
    }

    /// How the samples are searched (NearestNeighborsIndex's `IndexType` oneof).
    public enum Index: Hashable, Sendable {
        /// linearIndex (100): every sample compared with the query.
        case linear
        /// singleKdTreeIndex (110) with its leafSize (1).
        case kdTree(leafSize: Int32)

        /// "linear" or "kd-tree (leaf size N)".
        public var description: String {
            switch self { case .linear: return "linear"; case let .kdTree(n): return "kd-tree (leaf size \(n))" }
        }
    }

    /// NearestNeighborsIndex.numberOfDimensions (1): the length of every sample and query.
    public var dimension: Int32
    /// NearestNeighborsIndex.floatSamples (2): the stored samples, each a FloatVector.
    public var samples: [[Float]]
    /// The index type; nil when the file sets none (Core ML refuses that).
    public var index: Index?
    /// The distance: squaredEuclideanDistance (200), the only one Core ML defines; false when unset.
    public var squaredEuclideanDistance: Bool
    /// numberOfNeighbors (3): k, with the values an update may set it to. Early coremltools wrote an
    /// int32 `k` (field 2) instead; it is read as this parameter's default and written back as field 3.
    public var numberOfNeighbors: Int64Parameter?
    /// The samples' labels, one per sample; nil when the file sets neither list.
    public var labels: Labels?
    /// The default label; nil when the file sets none.
    public var defaultLabel: DefaultLabel?
    /// The weighting; nil when the file sets none (Core ML refuses that).
    public var weighting: Weighting?

    /// A k-NN classifier; an empty index of `dimension` unless `samples` are given.
    public init(dimension: Int32, samples: [[Float]] = [], index: Index? = .linear, squaredEuclideanDistance: Bool = true,
                numberOfNeighbors: Int64Parameter?, labels: Labels?, defaultLabel: DefaultLabel?, weighting: Weighting? = .uniform) {
        self.dimension = dimension; self.samples = samples; self.index = index
        self.squaredEuclideanDistance = squaredEuclideanDistance; self.numberOfNeighbors = numberOfNeighbors
        self.labels = labels; self.defaultLabel = defaultLabel; self.weighting = weighting
    }

    /// The distinct labels as text, in the order they first appear among the samples (then the default label).
    public var distinctLabels: [String] { distinctClassLabels?.asStrings ?? [] }

    /// The distinct labels, of the samples' type, in the order they first appear among the samples,
    /// then the default label when no sample has it; nil when the model has neither.
    public var distinctClassLabels: ClassLabels? {
        switch (labels, defaultLabel) {
        case let (.int64(v)?, d):
            var seen = Set<Int64>(), out: [Int64] = []
            for l in v + (d.flatMap { if case let .int64(x) = $0 { return [x] } else { return nil } } ?? []) where seen.insert(l).inserted { out.append(l) }
            return .int64(out)
        case (nil, .int64(let x)?): return .int64([x])
        case (nil, nil): return nil
        default:
            var seen = Set<String>(), out: [String] = []
            for l in (labels?.asStrings ?? []) + [defaultLabel?.text].compactMap({ $0 }) where seen.insert(l).inserted { out.append(l) }
            return .strings(out)
        }
    }
}

extension KNearestNeighborsSpec {
    init(reading r: ProtoReader) throws {
        let i = try r.messageOrEmpty(1, "nearestNeighborsIndex")
        dimension = try i.int32(1, "numberOfDimensions") ?? 0
        samples = try i.messages(2, "floatSamples").map { try $0.floats(1, "vector") }
        switch i.lastOf([100, 110])?.number {
        case 100?: index = .linear
        case 110?: index = .kdTree(leafSize: try i.message(110, "singleKdTreeIndex")?.int32(1, "leafSize") ?? 0)
        default: index = nil
        }
        squaredEuclideanDistance = i.has(200)
        if let k = try r.message(3, "numberOfNeighbors") {
            numberOfNeighbors = try Int64Parameter(reading: k)
        } else if let k = try r.int32(2, "k") {
            numberOfNeighbors = Int64Parameter(defaultValue: Int64(k))
        } else {
            numberOfNeighbors = nil
        }
        switch r.lastOf([100, 101])?.number {
        case 100?: labels = .strings(try r.messageOrEmpty(100, "stringClassLabels").strings(1, "vector"))
        case 101?: labels = .int64(try r.messageOrEmpty(101, "int64ClassLabels").varints(1, "vector").map { Int64(bitPattern: $0) })
        default: labels = nil
        }
        switch r.lastOf([110, 111])?.number {
        case 110?: defaultLabel = .string(try r.string(110, "defaultStringLabel") ?? "")
        case 111?: defaultLabel = .int64(try r.int64(111, "defaultInt64Label") ?? 0)
        default: defaultLabel = nil
        }
        switch r.lastOf([200, 210])?.number {
        case 200?: weighting = .uniform
        case 210?: weighting = .inverseDistance
        default: weighting = nil
        }
    }

    func encoded() -> ProtoMessage {
        var w = MessageWriter()
        w.message(1) { i in
            i.int32(1, dimension)
            for s in samples { i.message(2) { v in v.floats(1, s) } }
            switch index {
            case .linear?: i.message(100, ProtoMessage())
            case let .kdTree(leafSize)?: i.message(110) { t in t.int32(1, leafSize) }
            case nil: break
            }
            if squaredEuclideanDistance { i.message(200, ProtoMessage()) }
        }
        if let k = numberOfNeighbors { w.message(3, k.encoded()) }
        switch labels {
        case let .strings(s)?: w.message(100) { v in v.strings(1, s) }
        case let .int64(s)?: w.message(101) { v in v.int64s(1, s) }
        case nil: break
        }
        switch defaultLabel {
        case let .string(s)?: w.field(ProtoField(number: 110, string: s))
        case let .int64(v)?: w.field(ProtoField(number: 111, int64: v))
        case nil: break
        }
        switch weighting {
        case .uniform?: w.message(200, ProtoMessage())
        case .inverseDistance?: w.message(210, ProtoMessage())
        case nil: break
        }
        return w.message
    }
}
