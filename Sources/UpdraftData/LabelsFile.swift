import Foundation
import UpdraftCore

/// A labels file: one `path,label` row per image, paths relative to the file's folder (or absolute).
///
/// Rows are taken in the file's order. An optional first row `path,label` is a header. Empty rows and
/// rows starting with `#` are skipped. Fields may be double-quoted (`"a,b.png",cat`; `""` is a quote
/// inside quotes); spaces around fields are trimmed.
public struct LabelsFile: Sendable {
    /// One image and its class, as written in the file.
    public struct Row: Equatable, Sendable {
        /// The image path as written: relative to the labels file's folder, or absolute.
        public var path: String
        /// The class label as written (spaces trimmed); the data set maps it to the model's class index.
        public var label: String
        /// 1-based line number, for messages.
        public var line: Int
    }

    /// The labels file read.
    public let url: URL
    /// The data rows in file order (header, empty and `#` rows left out); never empty.
    public let rows: [Row]

    /// - Throws: `UpdraftError` naming the file (and the line) when it cannot be read, is not UTF-8,
    ///   a row has other than two fields or an empty one, or there are no rows.
    public init(contentsOf url: URL) throws {
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw UpdraftError(.io, "cannot read labels file \(url.path): \(error.localizedDescription)",
                               hint: "give a readable CSV file of path,label rows")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw UpdraftError(.data, "labels file \(url.path) is not UTF-8 text", hint: "save it as UTF-8 CSV")
        }
        self.url = url
        var rows: [Row] = []
        for (n, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            var line = Substring(rawLine)
            if line.hasSuffix("\r") { line = line.dropLast() }
            if line.trimmingCharacters(in: .whitespaces).isEmpty || line.hasPrefix("#") { continue }
            let fields = try Self.fields(line, file: url, line: n + 1)
            guard fields.count == 2, !fields[0].isEmpty, !fields[1].isEmpty else {
                throw UpdraftError(.data, "labels file \(url.path) line \(n + 1): expected path,label, got \(fields.count) field\(fields.count == 1 ? "" : "s") ('\(line.prefix(80))')",
                                   hint: "write one image path and its class label per row, separated by a comma")
            }
            if rows.isEmpty && fields[0].lowercased() == "path" && fields[1].lowercased() == "label" { continue }
            rows.append(Row(path: fields[0], label: fields[1], line: n + 1))
        }
        guard !rows.isEmpty else {
            throw UpdraftError(.data, "labels file \(url.path) has no path,label rows", hint: "add one row per image: images/0001.jpg,cat")
        }
        self.rows = rows
    }

    /// The row's image file: relative paths from the labels file's folder.
    public func imageURL(_ row: Row) -> URL {
        row.path.hasPrefix("/") ? URL(fileURLWithPath: row.path)
            : url.deletingLastPathComponent().appendingPathComponent(row.path)
    }

    /// Splits one CSV line into trimmed fields, honouring double quotes.
    static func fields(_ line: Substring, file: URL, line number: Int) throws -> [String] {
        var fields: [String] = [], current = "", quoted = false, wasQuoted = false
        var chars = line.makeIterator()
        while let c = chars.next() {
            if quoted {
                if c == "\"" {
                    // A doubled quote is a quote; a single one ends the quoted part.
                    var lookahead = chars
                    if lookahead.next() == "\"" { current.append("\""); chars = lookahead } else { quoted = false }
                } else {
                    current.append(c)
                }
            } else if c == "\"" && current.trimmingCharacters(in: .whitespaces).isEmpty {
                quoted = true; wasQuoted = true; current = ""
            } else if wasQuoted && c.isWhitespace {
                continue  // spaces after a closing quote
            } else if c == "," {
                fields.append(wasQuoted ? current : current.trimmingCharacters(in: .whitespaces))
                current = ""; wasQuoted = false
            } else {
                current.append(c)
            }
        }
        guard !quoted else {
            throw UpdraftError(.data, "labels file \(file.path) line \(number): a quoted field is not closed",
                               hint: "close the quotes, or write \"\" for a quote inside a quoted field")
        }
        fields.append(wasQuoted ? current : current.trimmingCharacters(in: .whitespaces))
        return fields
    }
}

extension ImageFolderDataset {
    /// Labelled images listed in a labels file (see `LabelsFile`), checked as class folders are: each
    /// label must be one of `classLabels` (nil: the file's labels, sorted), only regular files are
    /// read (nothing is decoded until asked for).
    /// - Throws: `UpdraftError` naming the file and line: a label the model does not have, an image
    ///   that is missing (unless `skipUnreadable`), or what reading the file throws.
    public init(labelsCSV url: URL, preprocessing: ImagePreprocessing, classLabels: [String]? = nil,
                skipUnreadable: Bool = false, limits: ImageDecodingLimits = .default, imageCacheBytes: Int? = nil,
                budget: DecodeMemoryBudget = .shared) throws {
        try preprocessing.validate()
        try limits.validate()
        let file = try LabelsFile(contentsOf: url)
        let labels = classLabels ?? Set(file.rows.map(\.label)).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        var index: [String: Int] = [:]
        for (i, label) in labels.enumerated() where index[label] == nil { index[label] = i }
        var warnings: [String] = []
        var candidates: [(url: URL, classIndex: Int)] = []
        for row in file.rows {
            guard let classIndex = index[row.label] else {
                let shown = labels.prefix(30).map { "'\($0)'" }.joined(separator: ", ")
                throw UpdraftError(.data, "labels file \(url.path) line \(row.line): label '\(row.label)' is none of the model's class labels: \(shown)\(labels.count > 30 ? ", …" : "")",
                                   hint: "use the model's labels (they are case-sensitive), or remove the row")
            }
            let image = file.imageURL(row)
            if let odd = Self.notRegularFile(image) {
                let message = "labels file \(url.path) line \(row.line): '\(row.path)' \(odd.hasPrefix("cannot") ? odd : "is \(odd)")"
                if odd.hasPrefix("cannot") && !skipUnreadable {
                    throw UpdraftError(.io, message, hint: "paths are relative to the labels file's folder; fix the row, or pass --skip-unreadable")
                }
                warnings.append("skipped \(message); only regular files are read")
                continue
            }
            candidates.append((image, classIndex))
        }
        guard !candidates.isEmpty else {
            throw UpdraftError(.data, "none of the images listed in \(url.path) can be read", hint: "see the warnings for each row")
        }
        try self.init(root: url, candidates: candidates, labels: labels, warnings: warnings, preprocessing: preprocessing,
                      skipUnreadable: skipUnreadable, limits: limits, imageCacheBytes: imageCacheBytes, budget: budget)
    }
}
