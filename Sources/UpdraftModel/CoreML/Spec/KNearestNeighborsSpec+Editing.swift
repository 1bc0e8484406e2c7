import UpdraftCore

// What Updraft does to a k-NN's samples past Core ML (which can only append): append, checked;
// remove a label; cap the samples per label; drop exact duplicates; count per label; choose k.
// Each keeps the samples' order otherwise, so the same edit on the same model gives the same file.
extension KNearestNeighborsSpec {
    /// The labels' type as Core ML names it, for messages ("string" or "int64"); nil when the model
    /// has neither labels nor a default label, so any type may come first.
    public var labelType: String? {
        switch (labels, defaultLabel) {
        case (.strings?, _), (nil, .string?): return "string"
        case (.int64?, _), (nil, .int64?): return "int64"
        case (nil, nil): return nil
        }
    }

    /// Appends `samples` (each `dimension` values) with their `labels` (one each, of the model's label
    /// type), as Core ML's update does. Labels the model has not seen are added; an empty k-NN is a
    /// valid start (with no labels and no default label, the first labels set the type).
    /// - Throws: `.invalidArgument` for a sample that is not `dimension` long (naming both), as many
    ///   labels as samples, or labels of the other type; nothing is appended then.
    public mutating func append(samples new: [[Float]], labels newLabels: ClassLabels) throws {
        guard newLabels.count == new.count else {
            throw UpdraftError(.invalidArgument, "\(new.count) sample\(new.count == 1 ? "" : "s") but \(newLabels.count) label\(newLabels.count == 1 ? "" : "s") to append",
                               hint: "give one label per sample, in the samples' order")
        }
        if let bad = new.firstIndex(where: { $0.count != Int(dimension) }) {
            throw UpdraftError(.invalidArgument,
                "sample \(bad) to append has dimension \(new[bad].count), but the k-NN's samples have dimension \(dimension)",
                hint: "give vectors of \(dimension) values (the model's numberOfDimensions), e.g. inputs.npy of shape [N, \(dimension)]")
        }
        try checkLabelType(of: newLabels)
        samples += new
        switch (labels, newLabels) {
        case let (.strings(old)?, .strings(add)): labels = .strings(old + add)
        case let (.int64(old)?, .int64(add)): labels = .int64(old + add)
        default: labels = newLabels  // no labels yet (the checks above ruled out the other type)
        }
    }

    /// Throws when `labels` are not of the k-NN's label type (string vs int64), naming both.
    public func checkLabelType(of labels: ClassLabels) throws {
        let given = labels.typeName
        if let type = labelType, type != given {
            throw UpdraftError(.invalidArgument, "the labels to append are \(given) labels, but the k-NN's labels are \(type)",
                               hint: type == "int64" ? "give whole-number labels (labels.txt with one integer per line, or an integer targets.npy)"
                                                     : "give the labels as text (labels.txt, one label per line)")
        }
    }

    /// `self` with `samples` appended (see `append(samples:labels:)`).
    public func appending(samples new: [[Float]], labels newLabels: ClassLabels) throws -> KNearestNeighborsSpec {
        var copy = self
        try copy.append(samples: new, labels: newLabels)
        return copy
    }

    /// Each sample's label as text, in sample order (empty when the model has no labels).
    public var sampleLabelTexts: [String] { labels?.asStrings ?? [] }

    /// How many samples each label has, in the order labels first appear among the samples.
    public var samplesPerLabel: [(label: String, count: Int)] {
        var order: [String] = [], counts: [String: Int] = [:]
        for l in sampleLabelTexts {
            if counts[l] == nil { order.append(l) }
            counts[l, default: 0] += 1
        }
        return order.map { ($0, counts[$0]!) }
    }

    /// Keeps only the samples at `kept` (ascending indices), with their labels.
    mutating func keepSamples(_ kept: [Int]) {
        samples = kept.map { samples[$0] }
        switch labels {
        case let .strings(s)?: labels = .strings(kept.map { s[$0] })
        case let .int64(v)?: labels = .int64(kept.map { v[$0] })
        case nil: break
        }
    }

    /// Removes every sample whose label is `label` (given as text); returns how many were removed.
    /// - Throws: `.invalidArgument` when no sample has that label (naming the labels there are).
    @discardableResult
    public mutating func removeSamples(labelled label: String) throws -> Int {
        let texts = sampleLabelTexts
        guard texts.contains(label) else {
            throw UpdraftError(.invalidArgument, "no sample of the k-NN is labelled '\(label)'",
                               hint: "its labels are: \(samplesPerLabel.map(\.label).joined(separator: ", "))")
        }
        let kept = texts.indices.filter { texts[$0] != label }
        keepSamples(kept)
        return texts.count - kept.count
    }

    /// Keeps at most `limit` samples of each label, chosen by reservoir sampling (algorithm R) over
    /// the label's samples in order, with a `SplitMix64` stream seeded by `seed` per label (the seed
    /// mixed with the label's text), so the same model, limit and seed keep the same samples. The
    /// kept samples stay in their order. Returns how many were removed.
    @discardableResult
    public mutating func capSamplesPerLabel(_ limit: Int, seed: UInt64) throws -> Int {
        guard limit >= 1 else {
            throw UpdraftError(.invalidArgument, "the per-label cap is \(limit); it must be at least 1", hint: "to drop a label, remove it")
        }
        let texts = sampleLabelTexts
        var members: [String: [Int]] = [:]
        for (i, l) in texts.enumerated() { members[l, default: []].append(i) }
        var kept: [Int] = []
        for (label, indices) in members {
            var rng = SplitMix64(seed: seed ^ Self.labelHash(label))
            var reservoir = Array(indices.prefix(limit))
            for j in limit..<max(limit, indices.count) {
                let r = Int(rng.next() % UInt64(j + 1))
                if r < limit { reservoir[r] = indices[j] }
            }
            kept += reservoir
        }
        kept.sort()
        keepSamples(kept)
        return texts.count - kept.count
    }

    /// FNV-1a of a label's UTF-8 bytes: a per-label seed that does not depend on Swift's hashing.
    private static func labelHash(_ label: String) -> UInt64 {
        label.utf8.reduce(0xcbf2_9ce4_8422_2325 as UInt64) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
    }

    /// Drops every sample that repeats an earlier one exactly (the same values bit for bit and the
    /// same label); the first stays. Returns how many were removed.
    @discardableResult
    public mutating func removeDuplicateSamples() -> Int {
        struct Key: Hashable { var bits: [UInt32]; var label: String }
        let texts = sampleLabelTexts
        var seen = Set<Key>()
        var kept: [Int] = []
        for (i, s) in samples.enumerated() where seen.insert(Key(bits: s.map(\.bitPattern), label: i < texts.count ? texts[i] : "")).inserted {
            kept.append(i)
        }
        let removed = samples.count - kept.count
        keepSamples(kept)
        return removed
    }

    /// Checks `k` against numberOfNeighbors' allowed range or set (and k >= 1).
    /// - Throws: `.invalidArgument` naming k and the allowed values.
    public func checkNumberOfNeighbors(_ k: Int) throws {
        guard k >= 1 else {
            throw UpdraftError(.invalidArgument, "numberOfNeighbors = \(k) is not allowed: k must be at least 1", hint: "give --neighbors 1 or more")
        }
        if let p = numberOfNeighbors, let allowed = p.allowed, !allowed.allows(Int64(k)) {
            throw UpdraftError(.invalidArgument,
                "numberOfNeighbors = \(k) is not allowed by this model: allowed values are \(HyperparameterConstraint.int(allowed))",
                hint: "pick one of the allowed values (the model's default is \(p.defaultValue)), or widen them in the model (coremltools: set_number_of_neighbors_with_bounds)")
        }
    }

    /// Sets numberOfNeighbors' default to `k` after `checkNumberOfNeighbors(_:)`, keeping its allowed values.
    public mutating func setNumberOfNeighbors(_ k: Int) throws {
        try checkNumberOfNeighbors(k)
        numberOfNeighbors = Int64Parameter(defaultValue: Int64(k), allowed: numberOfNeighbors?.allowed)
    }
}

extension ClassLabels {
    /// "string" or "int64", as Core ML names the label types.
    public var typeName: String {
        switch self { case .strings: return "string"; case .int64: return "int64" }
    }
}
