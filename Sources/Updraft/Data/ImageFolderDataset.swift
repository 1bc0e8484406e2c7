import Dispatch
import Foundation

/// Labelled images in class folders: `root/<class>/<image>.png|.jpg|.jpeg`.
///
/// - Class folders and the files in each are taken in sorted order (by name, byte-wise on UTF-8), so
///   example indices are the same on every machine. Hidden entries (names starting with ".") are
///   ignored; other non-image files and nested folders are skipped with a warning. Extensions are
///   matched case-insensitively.
/// - Each folder name must be one of the model's class labels; the example's target is that label's
///   index. Labels without a folder are fine (the model may know more classes than the data shows).
/// - Every image is decoded when the dataset is created (in parallel), so unreadable files are found
///   before training starts, and kept in memory as a `PreparedImage`: resized to the model's input
///   size and color space, 8 bits per sample (`C * H * W` bytes each: 151 KiB for 227x227 RGB, so
///   a few thousand images take a few hundred MiB, a quarter of what float tensors would). The float
///   `[C, H, W]` tensor, scaler applied, is made on each `example(at:)`.
public struct ImageFolderDataset: BatchProvider, Sendable {
    /// Image file extensions read, compared lowercased.
    public static let imageExtensions: Set<String> = ["png", "jpg", "jpeg"]

    public let root: URL
    public let preprocessing: ImagePreprocessing
    /// The model's class labels; targets are indices into this array.
    public let classLabels: [String]
    /// The image files, in example order.
    public let files: [URL]
    /// Each example's class index, in example order.
    public let classIndices: [Int]
    /// What was skipped and why; print them with `printWarnings()`.
    public let warnings: [String]
    /// All examples' prepared samples, back to back.
    private let storage: [UInt8]

    /// Lists and decodes the dataset.
    /// - Parameters:
    ///   - root: the folder holding one subfolder per class.
    ///   - preprocessing: the model's image input.
    ///   - classLabels: the model's class labels; nil to use the sorted folder names.
    ///   - skipUnreadable: skip images that fail to decode, with a warning, instead of throwing.
    /// - Throws: `UpdraftError` when the folder is missing or has no images, a folder matches no label
    ///   (naming it and listing the labels), or an image cannot be decoded (naming the file).
    public init(root: URL, preprocessing: ImagePreprocessing, classLabels: [String]? = nil,
                skipUnreadable: Bool = false) throws {
        try preprocessing.validate()
        var warnings: [String] = []
        let folders = try Self.classFolders(in: root, warnings: &warnings)
        let labels = classLabels ?? folders
        let folderClasses = try Self.labelIndices(folders: folders, labels: labels, root: root)

        var candidates: [(url: URL, classIndex: Int)] = []
        for (folder, classIndex) in zip(folders, folderClasses) {
            let url = root.appendingPathComponent(folder, isDirectory: true)
            let files = try Self.imageFiles(in: url, folderName: folder, warnings: &warnings)
            if files.isEmpty {
                warnings.append("class folder '\(folder)' in \(root.path) has no images: class '\(labels[classIndex])' gets no examples from this data")
            }
            for file in files {
                candidates.append((url.appendingPathComponent(file), classIndex))
            }
        }
        guard !candidates.isEmpty else {
            throw UpdraftError(.data, "no images (.png, .jpg, .jpeg) in the class folders of \(root.path)",
                               hint: "put images in one subfolder per class, e.g. \(root.path)/\(folders.first ?? "cat")/0001.png")
        }

        let (storage, failures) = Self.decodeAll(candidates.map(\.url), preprocessing: preprocessing)
        var kept: [Int] = []
        for (i, failure) in failures.enumerated() {
            guard let failure else { kept.append(i); continue }
            if !skipUnreadable {
                let others = failures.lazy.filter { $0 != nil }.count - 1
                var error = failure
                if others > 0 { error.message += " (and \(others) more unreadable image\(others == 1 ? "" : "s"))" }
                throw error
            }
            warnings.append("skipped unreadable image: \(failure.message)")
        }
        guard !kept.isEmpty else {
            throw UpdraftError(.data, "none of the \(candidates.count) images in \(root.path) could be decoded",
                               hint: "see the warnings for each file")
        }
        let itemBytes = preprocessing.channels * preprocessing.height * preprocessing.width
        if kept.count == candidates.count {
            self.storage = storage
        } else {
            var compact = [UInt8]()
            compact.reserveCapacity(kept.count * itemBytes)
            for i in kept { compact += storage[i * itemBytes..<(i + 1) * itemBytes] }
            self.storage = compact
        }
        self.root = root
        self.preprocessing = preprocessing
        self.classLabels = labels
        self.files = kept.map { candidates[$0].url }
        self.classIndices = kept.map { candidates[$0].classIndex }
        self.warnings = warnings
    }

    public var count: Int { files.count }

    /// Example `index`'s image at the model's size and color space, 8 bits per sample.
    public func preparedImage(at index: Int) throws -> PreparedImage {
        try checkIndex(index)
        let itemBytes = preprocessing.channels * preprocessing.height * preprocessing.width
        return PreparedImage(channels: preprocessing.channels, height: preprocessing.height, width: preprocessing.width,
                             samples: Array(storage[index * itemBytes..<(index + 1) * itemBytes]))
    }

    /// Example `index`: its `[C, H, W]` tensor (scaler applied) and its class index.
    public func target(at index: Int) throws -> TrainingExample.Target {
        try checkIndex(index)
        return .classIndex(classIndices[index])
    }

    public func example(at index: Int) throws -> TrainingExample {
        TrainingExample(input: preprocessing.tensor(from: try preparedImage(at: index)),
                        target: .classIndex(classIndices[index]))
    }

    /// How many examples each class label has, in label order.
    public var countsPerClass: [Int] {
        var counts = [Int](repeating: 0, count: classLabels.count)
        for c in classIndices { counts[c] += 1 }
        return counts
    }

    /// One line: images, classes, and where from.
    public var summary: String {
        let present = zip(classLabels, countsPerClass).filter { $0.1 > 0 }
        let perClass = present.prefix(12).map { "\($0.0): \($0.1)" }.joined(separator: ", ")
        return "\(count) images in \(present.count) classes from \(root.path) (\(perClass)\(present.count > 12 ? ", …" : ""))"
    }

    /// Writes each warning to standard error as `warning: …`.
    public func printWarnings() {
        for warning in warnings { FileHandleStandardError.write("warning: \(warning)\n") }
    }

    // MARK: - Listing

    private static func isHidden(_ name: String) -> Bool { name.hasPrefix(".") }

    private static func isDirectory(_ url: URL) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) && isDirectory.boolValue
    }

    /// Sorts names byte-wise on their UTF-8, independent of locale.
    private static func sortedNames(_ names: [String]) -> [String] {
        names.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }

    private static func contents(of url: URL, what: String) throws -> [String] {
        do {
            return try FileManager.default.contentsOfDirectory(atPath: url.path)
        } catch {
            throw UpdraftError(.io, "cannot list \(what) \(url.path): \(error.localizedDescription)",
                               hint: "check that the folder exists and is readable")
        }
    }

    static func classFolders(in root: URL, warnings: inout [String]) throws -> [String] {
        guard isDirectory(root) else {
            throw UpdraftError(.io, "image folder \(root.path) does not exist or is not a folder",
                               hint: "pass a folder with one subfolder of images per class")
        }
        var folders: [String] = []
        for name in sortedNames(try contents(of: root, what: "image folder")) where !isHidden(name) {
            if isDirectory(root.appendingPathComponent(name)) {
                folders.append(name)
            } else {
                warnings.append("ignored '\(name)' at the top of \(root.path): images go in one subfolder per class")
            }
        }
        guard !folders.isEmpty else {
            throw UpdraftError(.data, "image folder \(root.path) has no class subfolders",
                               hint: "put images in one subfolder per class, e.g. \(root.path)/cat/0001.png")
        }
        return folders
    }

    /// Each folder's index in `labels` (the first, if a label repeats).
    static func labelIndices(folders: [String], labels: [String], root: URL) throws -> [Int] {
        var index: [String: Int] = [:]
        for (i, label) in labels.enumerated() where index[label] == nil { index[label] = i }
        let unmatched = folders.filter { index[$0] == nil }
        guard unmatched.isEmpty else {
            let shown = labels.prefix(30).map { "'\($0)'" }.joined(separator: ", ")
            let more = labels.count > 30 ? ", … (\(labels.count) in all)" : ""
            let names = unmatched.map { "'\($0)'" }.joined(separator: ", ")
            var hint = "rename the folder to one of the labels, or remove it"
            let lowered = Dictionary(labels.map { ($0.lowercased(), $0) }, uniquingKeysWith: { a, _ in a })
            if let near = unmatched.lazy.compactMap({ name in lowered[name.lowercased()].map { (name, $0) } }).first {
                hint += " (labels are case-sensitive: '\(near.0)' vs '\(near.1)')"
            }
            throw UpdraftError(.data, "class folder\(unmatched.count == 1 ? "" : "s") \(names) in \(root.path) match\(unmatched.count == 1 ? "es" : "") none of the model's class labels: \(shown)\(more)",
                               hint: hint)
        }
        return folders.compactMap { index[$0] }
    }

    static func imageFiles(in folder: URL, folderName: String, warnings: inout [String]) throws -> [String] {
        var files: [String] = []
        for name in sortedNames(try contents(of: folder, what: "class folder")) where !isHidden(name) {
            let url = folder.appendingPathComponent(name)
            if isDirectory(url) {
                warnings.append("ignored folder '\(folderName)/\(name)': class folders are not searched recursively")
            } else if imageExtensions.contains(url.pathExtension.lowercased()) {
                files.append(name)
            } else {
                warnings.append("ignored '\(folderName)/\(name)': not a .png, .jpg or .jpeg file")
            }
        }
        return files
    }

    // MARK: - Decoding

    /// Decodes and prepares every file, in parallel, into one buffer; failures are returned per file.
    static func decodeAll(_ urls: [URL], preprocessing: ImagePreprocessing) -> ([UInt8], [UpdraftError?]) {
        let itemBytes = preprocessing.channels * preprocessing.height * preprocessing.width
        var storage = [UInt8](repeating: 0, count: urls.count * itemBytes)
        var failures = [UpdraftError?](repeating: nil, count: urls.count)
        storage.withUnsafeMutableBufferPointer { out in
            failures.withUnsafeMutableBufferPointer { errors in
                // Each iteration writes only its own slice of `out` and its own entry of `errors`.
                let out = out, errors = errors
                DispatchQueue.concurrentPerform(iterations: urls.count) { i in
                    do {
                        let prepared = preprocessing.prepare(try DecodedImage(contentsOf: urls[i]))
                        prepared.samples.withUnsafeBufferPointer { src in
                            out.baseAddress!.advanced(by: i * itemBytes).update(from: src.baseAddress!, count: itemBytes)
                        }
                    } catch let error as UpdraftError {
                        errors[i] = error
                    } catch {
                        errors[i] = UpdraftError(.data, "cannot decode image '\(urls[i].path)': \(error)")
                    }
                }
            }
        }
        return (storage, failures)
    }
}
