import Foundation
import UpdraftCore
import UpdraftModel

/// Multi-array data whose rows carry labels, not only class indices: a folder with `inputs.npy`
/// (`[N, ...]`) and either `labels.txt` (one label per line, in row order: the labels themselves)
/// or `targets.npy` (`[N]` integers). `labels.txt` wins when both exist. With `targets.npy`, an
/// int64-labelled k-NN reads the integers as its labels; every other model reads them as indices
/// into its class labels, as `NpyDataset` does.
///
/// The rows' labels are held as class indices into `labels`: the model's labels, then (where the
/// model may learn them: a k-NN) the labels it has not seen, in the order they first appear. As a
/// `KNearestNeighborsExampleSource`, each row is a vector with its label value.
public struct LabelledArrays: BatchProvider, KNearestNeighborsExampleSource, @unchecked Sendable {
    /// The rows, their targets class indices into `labels`.
    public let rows: NpyDataset
    /// The label table the rows' class indices point into.
    public let labels: ClassLabels
    /// The labels the model did not have, in the order they first appear.
    public let newLabels: [String]
    /// Where the labels came from ("labels.txt" or "targets.npy").
    public let labelSource: String

    /// The file that holds one label per line.
    public static let labelsFileName = "labels.txt"

    /// Reads the folder's `inputs.npy` with `labels.txt` (or, for `labelValuedTargets`, `targets.npy`).
    /// - Parameters:
    ///   - modelLabels: the model's labels (their type types labels.txt's lines); nil when it has none yet.
    ///   - labelType: the labels' type when the model has none (an empty k-NN): "string" (default) or "int64".
    ///   - learnsNewLabels: whether labels the model lacks are added (a k-NN) or an error.
    ///   - labelValuedTargets: read `targets.npy` as label values (an int64 k-NN), not indices.
    /// - Throws: before reading any row: a label file with more or fewer lines than inputs.npy has
    ///   rows (naming both counts); a line that is not an integer for int64 labels; a label the
    ///   model lacks when it cannot learn one.
    public init(folder: URL, exampleShape: Shape?, modelLabels: ClassLabels?, labelType: String? = nil,
                learnsNewLabels: Bool, labelValuedTargets: Bool) throws {
        let inputs = folder.appendingPathComponent("inputs.npy")
        let mapped: Data
        do { mapped = try Data(contentsOf: inputs, options: .alwaysMapped) } catch {
            throw UpdraftError(.io, "cannot read \(inputs.path): \(error.localizedDescription)",
                               hint: "give a folder with inputs.npy and labels.txt (or targets.npy)")
        }
        let rowCount = try NpyHeader.checked(data: mapped, name: inputs.path).0.shape.first ?? 0
        let labelsFile = folder.appendingPathComponent(Self.labelsFileName)
        let given: ClassLabels
        let type = modelLabels?.typeName ?? labelType ?? "string"
        if FileManager.default.fileExists(atPath: labelsFile.path) {
            labelSource = Self.labelsFileName
            let lines = try Self.lines(of: labelsFile)
            guard lines.count == rowCount else {
                throw UpdraftError(.data, "\(labelsFile.path) has \(lines.count) label\(lines.count == 1 ? "" : "s") (lines) but \(inputs.lastPathComponent) has \(rowCount) rows",
                                   hint: "give one label per line, one line per row of inputs.npy, in the same order")
            }
            if type == "int64" {
                given = .int64(try lines.enumerated().map { i, line in
                    guard let v = Int64(line.trimmingCharacters(in: .whitespaces)) else {
                        throw UpdraftError(.data, "\(labelsFile.path) line \(i + 1) is '\(line)', not an integer: the model's labels are int64",
                                           hint: "write one whole number per line")
                    }
                    return v
                })
            } else {
                given = .strings(lines)
            }
        } else {
            let targetsFile = folder.appendingPathComponent("targets.npy")
            labelSource = targetsFile.lastPathComponent
            let targets = try NpyArray(contentsOf: targetsFile)
            guard targets.shape.first == rowCount, targets.shape.count == 1 || (targets.shape.count == 2 && targets.shape[1] == 1) else {
                throw UpdraftError(.data, "\(targetsFile.path) has shape \(targets.shape) but \(inputs.lastPathComponent) has \(rowCount) rows",
                                   hint: "give one label per row: targets.npy of shape [\(rowCount)]")
            }
            let values: [Int]
            switch targets.values {
            case let .integer(v): values = v
            case let .float(v):
                // Whole numbers saved as floats read as the integers they are.
                guard let bad = v.firstIndex(where: { $0 != $0.rounded() || Int(exactly: $0) == nil }) else { values = v.map { Int($0) }; break }
                throw UpdraftError(.data, "\(targetsFile.path): target \(bad) is \(v[bad]), not a whole number",
                                   hint: "save integer labels (numpy int64), or write the labels to labels.txt")
            }
            if labelValuedTargets {
                given = .int64(values.map(Int64.init))
            } else {
                let table = modelLabels ?? .strings([])
                if let bad = values.firstIndex(where: { $0 < 0 || $0 >= table.count }) {
                    throw UpdraftError(.data, "\(targetsFile.path): target \(bad) is class \(values[bad]), outside 0..<\(table.count)",
                                       hint: "class indices count from 0 in the order of the model's labels; for labels the model lacks, write labels.txt")
                }
                given = table.picking(values)
            }
        }
        // The label table: the model's, then the new ones in order of appearance.
        var table = modelLabels?.asStrings ?? []
        var index = Dictionary(table.enumerated().map { ($1, $0) }, uniquingKeysWith: { a, _ in a })
        var new: [String] = []
        let indices = given.asStrings.map { label -> Int in
            if let i = index[label] { return i }
            index[label] = table.count
            table.append(label)
            new.append(label)
            return table.count - 1
        }
        if !new.isEmpty && !learnsNewLabels {
            throw UpdraftError(.data, "\(labelSource) holds label\(new.count == 1 ? "" : "s") the model does not have: \(new.prefix(5).joined(separator: ", "))\(new.count > 5 ? ", …" : "")",
                               hint: "the model's labels are: \((modelLabels?.asStrings ?? []).prefix(20).joined(separator: ", "))")
        }
        newLabels = new
        labels = given.typeName == "int64" ? .int64(table.map { Int64($0)! }) : .strings(table)
        rows = try NpyDataset(inputs: inputs, targets: NpyArray(shape: [rowCount], descr: "<i8", values: .integer(indices)),
                              targetsName: labelSource, exampleShape: exampleShape, targetKind: .classIndices, classCount: table.count)
    }

    /// The lines of a text file, without line endings (a final newline ends the last line; "\r\n" counts as one).
    static func lines(of url: URL) throws -> [String] {
        let text = String(decoding: try readFile(url, what: "the labels file"), as: UTF8.self)
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map { $0.hasSuffix("\r") ? String($0.dropLast()) : String($0) }
        if lines.last == "" { lines.removeLast() }
        return lines
    }

    /// One line: how many rows and labels, from where, and the labels new to the model.
    public var summary: String {
        "\(count) examples from inputs.npy and \(labelSource), \(labels.count - newLabels.count) known label\(labels.count - newLabels.count == 1 ? "" : "s")"
            + (newLabels.isEmpty ? "" : " and \(newLabels.count) new: \(newLabels.prefix(8).joined(separator: ", "))\(newLabels.count > 8 ? ", …" : "")")
    }

    public var count: Int { rows.count }
    public func example(at index: Int) throws -> TrainingExample { try rows.example(at: index) }
    public func target(at index: Int) throws -> TrainingExample.Target { try rows.target(at: index) }

    public func labels(in range: Range<Int>) throws -> ClassLabels {
        try BatchProviderExampleSource(data: rows, labels: labels).labels(in: range)
    }

    public func examples(in range: Range<Int>) throws -> (vectors: Tensor, labels: ClassLabels) {
        try BatchProviderExampleSource(data: rows, labels: labels).examples(in: range)
    }
}

extension ClassLabels {
    /// The labels at `indices`, of the same type.
    func picking(_ indices: [Int]) -> ClassLabels {
        switch self {
        case let .strings(s): return .strings(indices.map { s[$0] })
        case let .int64(v): return .int64(indices.map { v[$0] })
        }
    }
}
