import UpdraftCore

/// Every problem that stops a model's graph from being built, collected in one pass instead of
/// thrown at the first: `updraft inspect` lists them all, and `NetworkGraph(model:)` (so `plan`,
/// `train`, `UpdateTask`, `TrainingSession`) refuses with the same list in one error.
///
/// A layer that fails (whatever `ShapeInference` throws for it) leaves its output blob unknown;
/// layers that read an unknown blob are not shape-checked (their shapes cannot be known) but are
/// still asked whether their type or options are supported at all, so every unsupported layer is
/// listed, while the layers merely downstream of a failure are counted in one note rather than
/// reported as causes of their own.
/// One problem that stops the graph from being built: the layer it concerns and the error.
public struct GraphProblem: Sendable, Equatable {
    /// The layer concerned; nil for the input and for problems of the network's structure.
    public var layer: String?
    /// The layer's type as `inspect` shows it ("clip", "activation sigmoidHard").
    public var layerType: String?
    /// The error as the graph builder or `ShapeInference` threw it.
    public var error: UpdraftError

    /// Whether the layer's type or an option of it is what Updraft lacks (rather than a mistake in the model).
    public var isUnsupported: Bool { error.kind == .unsupported }

    /// The message without its "layer 'NAME' (TYPE): " lead, so that layers failing alike group together.
    public var reason: String {
        guard let layer else { return error.message }
        var m = error.message
        for lead in ["layer '\(layer)' (\(layerType ?? "")): ", "layer '\(layer)' (\(layerTypeName ?? "")): ", "layer '\(layer)' "]
        where m.hasPrefix(lead) {
            m.removeFirst(lead.count)
            break
        }
        // ShapeInference's "is a clip layer (NeuralNetworkLayer field N), which Updraft cannot run".
        if m.hasPrefix("is a "), m.hasSuffix("which Updraft cannot run") {
            let field = m.range(of: "(NeuralNetworkLayer field ").map { m[$0.lowerBound...].prefix { $0 != ")" } + ")" }
            return "Updraft cannot run this layer type" + (field.map { " \($0)" } ?? "")
        }
        return m
    }

    /// The oneof name alone (for matching ShapeInference's "layer 'X' (typeName): " lead).
    var layerTypeName: String?
}

/// Problems that share a layer type and a reason (for unsupported layers), or one problem.
public struct GraphProblemGroup: Sendable, Equatable {
    /// The shared layer type as `inspect` shows it; nil for problems not tied to a layer.
    public var layerType: String?
    /// Every layer in the group, in execution order.
    public var layers: [String]
    /// The errors' kind (`.unsupported` for a group of unsupported layers).
    public var kind: UpdraftError.Kind
    /// One line: "clip: 35 layers (a, b, …), not supported: …", or the problem's own message.
    public var message: String
    /// The first problem's hint on how to fix or work around it, if it has one.
    public var hint: String?
}

/// Every problem found while building a graph, and the layers left unchecked downstream of them (see the notes at the top of GraphProblems.swift).
public struct GraphProblems: Sendable {
    /// The problems in the order they were found (execution order).
    public private(set) var problems: [GraphProblem] = []
    /// Layers not checked because they read a blob that a failed layer (or a missing input) should
    /// have produced, each with that cause.
    public private(set) var unchecked: [(layer: String, cause: String)] = []

    /// An empty collection.
    public init() {}

    /// True when no problem was found (unchecked layers alone do not count).
    public var isEmpty: Bool { problems.isEmpty }

    mutating func add(_ error: Error, layer: LayerSpec? = nil) {
        let e = error as? UpdraftError ?? UpdraftError(.invalidModel, "\(error)")
        problems.append(GraphProblem(layer: layer?.name, layerType: layer.map(\.typeDescription), error: e,
                                     layerTypeName: layer?.typeName))
    }

    mutating func addUnchecked(_ layer: String, cause: String) { unchecked.append((layer, cause)) }

    /// How many names a line shows before "…".
    static let namesShown = 8

    static func nameList(_ names: [String]) -> String {
        names.prefix(namesShown).map { "'\($0)'" }.joined(separator: ", ") + (names.count > namesShown ? ", … \(names.count - namesShown) more" : "")
    }

    /// Unsupported layers grouped by type and reason (in order of first appearance); every other problem alone.
    public var groups: [GraphProblemGroup] {
        var out: [GraphProblemGroup] = []
        var members: [[GraphProblem]] = []
        var index: [String: Int] = [:]
        for p in problems {
            if p.isUnsupported, p.layer != nil {
                let key = "\(p.layerType ?? "")\u{1}\(p.reason)\u{1}\(p.error.hint ?? "")"
                if let i = index[key] { members[i].append(p); continue }
                index[key] = members.count
            }
            members.append([p])
        }
        for group in members {
            let first = group[0]
            let names = group.compactMap(\.layer)
            if first.isUnsupported, let type = first.layerType {
                let message = "\(type): \(names.count) layer\(names.count == 1 ? "" : "s") (\(GraphProblems.nameList(names))), not supported: \(first.reason)"
                out.append(GraphProblemGroup(layerType: type, layers: names, kind: .unsupported, message: message, hint: first.error.hint))
            } else {
                out.append(GraphProblemGroup(layerType: first.layerType, layers: names, kind: first.error.kind,
                                             message: first.error.message, hint: first.error.hint))
            }
        }
        return out
    }

    /// The note about layers downstream of a failure, or nil.
    public var uncheckedNote: String? {
        guard !unchecked.isEmpty else { return nil }
        let n = unchecked.count
        return "\(n) layer\(n == 1 ? "" : "s") after \(n == 1 ? "it" : "them") not checked (\(n == 1 ? "it reads" : "they read") outputs of the layers above): "
            + GraphProblems.nameList(unchecked.map(\.layer))
    }

    /// One error for all of it: a single problem as it was thrown, or every group on its own line.
    public var error: UpdraftError {
        if problems.count == 1 { return problems[0].error }
        let groups = self.groups
        let kind: UpdraftError.Kind = groups.contains { $0.kind == .unsupported } ? .unsupported : groups.first?.kind ?? .invalidModel
        let layerCount = Set(problems.compactMap(\.layer)).count
        var lines = ["the model has \(problems.count) problem\(problems.count == 1 ? "" : "s") Updraft cannot get past"
                     + (layerCount > 0 ? " in \(layerCount) layer\(layerCount == 1 ? "" : "s")" : "") + ":"]
        var hints: Set<String> = []   // each hint once, under the first problem it helps
        for g in groups {
            let hint = g.hint.flatMap { hints.insert($0).inserted ? $0 : nil }
            lines.append("  - " + g.message + (hint.map { "\n      hint: \($0)" } ?? ""))
        }
        if let note = uncheckedNote { lines.append("  (\(note))") }
        return UpdraftError(kind, lines.joined(separator: "\n"),
                            hint: "`updraft inspect MODEL` lists them with every layer's shape; replace or remove the layers it cannot run")
    }
}
