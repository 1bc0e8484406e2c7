import Dispatch
import Foundation
import UpdraftCore

/// Labelled images: in class folders, `root/<class>/<image>.png|.jpg|.jpeg`, or listed in a labels
/// file (`init(labelsCSV:…)`).
///
/// - Class folders and the files in each are taken in sorted order (by name, byte-wise on UTF-8), so
///   example indices are the same on every machine. Hidden entries (names starting with ".") are
///   ignored; other non-image files and nested folders are skipped with a warning. Extensions are
///   matched case-insensitively. Only regular files (or links to them) are read: a FIFO, a device or
///   a socket named like an image is skipped with one warning, before anything opens it.
/// - Each folder name must be one of the model's class labels; the example's target is that label's
///   index. Labels without a folder are fine (the model may know more classes than the data shows).
/// - **Streaming.** Creating the data set only lists the files (and checks each is a regular file):
///   nothing is opened, so even a cold disk lists quickly. Images are decoded when an example is
///   asked for — the header first, checked against the pixel cap, then the data — (the trainer's prefetcher
///   asks ahead, on worker threads), so memory does not grow with the data set. A small set can keep
///   its prepared images in memory (`imageCacheBytes`, 8 bits a sample: 151 KiB for 227x227 RGB); by
///   default they are kept when all of them fit in 512 MiB.
/// - With `skipUnreadable`, every image is also decoded once at creation (in parallel, nothing kept),
///   so files whose data is damaged past the header are found and skipped before training; without
///   it, a file that is not an image, declares too many pixels or is damaged fails the mini-batch
///   that reads it, naming the file.
public struct ImageFolderDataset: BatchProvider, EpochAugmentedProvider, Sendable {
    /// Image file extensions read, compared lowercased.
    public static let imageExtensions: Set<String> = ["png", "jpg", "jpeg"]
    /// The decoded-image cache's default budget: used only when every image fits.
    public static let defaultImageCacheBytes = 512 << 20

    /// The class folder's root, or the labels file.
    public let root: URL
    /// How each image becomes the model's input: size, color space, resize mode, filter and scaler.
    public let preprocessing: ImagePreprocessing
    /// The pixel cap each file's header is checked against before it is decoded.
    public let limits: ImageDecodingLimits
    /// The model's class labels; targets are indices into this array.
    public let classLabels: [String]
    /// The image files, in example order.
    public let files: [URL]
    /// Each example's class index, in example order.
    public let classIndices: [Int]
    /// What was skipped and why; print them with `printWarnings()`.
    public let warnings: [String]
    /// Prepared images kept in memory, when the set is small enough.
    let cache: PreparedImageCache?
    let budget: DecodeMemoryBudget

    /// Lists the dataset (with `skipUnreadable`, also decodes every image once).
    /// - Parameters:
    ///   - root: the folder holding one subfolder per class.
    ///   - preprocessing: the model's image input.
    ///   - classLabels: the model's class labels; nil to use the sorted folder names.
    ///   - skipUnreadable: skip images that fail to decode, with a warning, instead of throwing.
    ///   - limits: the pixel cap checked on each header.
    ///   - imageCacheBytes: memory for prepared images; nil: all of them if they fit in
    ///     `defaultImageCacheBytes`, else none; 0: none.
    /// - Throws: `UpdraftError` when the folder is missing or has no images, a folder matches no label
    ///   (naming it and listing the labels), or (with `skipUnreadable`) no image can be decoded.
    public init(root: URL, preprocessing: ImagePreprocessing, classLabels: [String]? = nil,
                skipUnreadable: Bool = false, limits: ImageDecodingLimits = .default, imageCacheBytes: Int? = nil,
                budget: DecodeMemoryBudget = .shared) throws {
        try preprocessing.validate()
        try limits.validate()
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
        try self.init(root: root, candidates: candidates, labels: labels, warnings: warnings, preprocessing: preprocessing,
                      skipUnreadable: skipUnreadable, limits: limits, imageCacheBytes: imageCacheBytes, budget: budget)
    }

    /// With `skipUnreadable`, decodes every candidate once and keeps those that pass.
    init(root: URL, candidates: [(url: URL, classIndex: Int)], labels: [String], warnings: [String],
         preprocessing: ImagePreprocessing, skipUnreadable: Bool, limits: ImageDecodingLimits, imageCacheBytes: Int?,
         budget: DecodeMemoryBudget) throws {
        var warnings = warnings
        let urls = candidates.map(\.url)
        // Without skipUnreadable nothing is opened here: on a cold disk one read per file is most of
        // the time to list (18 s for 8,000 files on this project's shared machine), and every header
        // is checked anyway when its image is decoded.
        let failures = skipUnreadable
            ? Self.checkAll(urls, preprocessing: preprocessing, limits: limits, budget: budget)
            : [UpdraftError?](repeating: nil, count: urls.count)
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
        self.root = root
        self.preprocessing = preprocessing
        self.limits = limits
        self.classLabels = labels
        self.files = kept.map { candidates[$0].url }
        self.classIndices = kept.map { candidates[$0].classIndex }
        self.warnings = warnings
        self.budget = budget
        let itemBytes = preprocessing.channels * preprocessing.height * preprocessing.width
        let (total, overflow) = itemBytes.multipliedReportingOverflow(by: kept.count)
        let budgetBytes = imageCacheBytes ?? (!overflow && total <= Self.defaultImageCacheBytes ? total : 0)
        self.cache = budgetBytes >= itemBytes ? PreparedImageCache(count: kept.count, itemBytes: itemBytes, budgetBytes: budgetBytes) : nil
    }

    /// As `BatchProvider.count`: the number of image files listed (after any skipped).
    public var count: Int { files.count }

    /// Bytes of prepared images held in memory now (the decoded-image cache).
    public var cachedImageBytes: Int { cache?.bytes ?? 0 }

    /// Example `index`'s image at the model's size and color space, 8 bits per sample.
    public func preparedImage(at index: Int) throws -> PreparedImage {
        try preparedImage { try writePixels(at: index, into: $0) }
    }

    /// Example `index`'s image with `augmentation`'s random resized crop for `epoch` (decoded in full,
    /// never cached); without a crop, `preparedImage(at:)`.
    public func preparedImage(at index: Int, epoch: Int, augmentation: ImageAugmentation) throws -> PreparedImage {
        try preparedImage { try writePixels(at: index, epoch: epoch, augmentation: augmentation, into: $0) }
    }

    private func preparedImage(_ write: (UnsafeMutableBufferPointer<UInt8>) throws -> Void) throws -> PreparedImage {
        let p = preprocessing
        var samples = [UInt8](repeating: 0, count: p.channels * p.height * p.width)
        try samples.withUnsafeMutableBufferPointer { try write($0) }
        return PreparedImage(channels: p.channels, height: p.height, width: p.width, samples: samples)
    }

    /// As `BatchProvider.target(at:)`, without decoding the image: the class index from its folder or labels row.
    public func target(at index: Int) throws -> TrainingExample.Target {
        try checkIndex(index)
        return .classIndex(classIndices[index])
    }

    /// Example `index`: its `[C, H, W]` tensor (scaler applied) and its class index.
    public func example(at index: Int) throws -> TrainingExample {
        TrainingExample(input: preprocessing.tensor(from: try preparedImage(at: index)),
                        target: .classIndex(classIndices[index]))
    }

    /// As `EpochAugmentedProvider.example(at:epoch:augmentation:)`: the image decoded, cropped as the augmentation picks for `(seed, epoch, index)`, resized and scaled; its class index as target.
    public func example(at index: Int, epoch: Int, augmentation: ImageAugmentation) throws -> TrainingExample {
        TrainingExample(input: preprocessing.tensor(from: try preparedImage(at: index, epoch: epoch, augmentation: augmentation)),
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
                if let odd = notRegularFile(url) {
                    warnings.append("skipped '\(folderName)/\(name)': \(odd); only regular files are read")
                } else {
                    files.append(name)
                }
            } else {
                warnings.append("ignored '\(folderName)/\(name)': not a .png, .jpg or .jpeg file")
            }
        }
        return files
    }

    /// Nil for a regular file (or a link to one); else what it is instead: a FIFO, a device or a
    /// socket would block or never end if read, so they are skipped before anything opens them.
    static func notRegularFile(_ url: URL) -> String? {
        var info = stat()
        guard stat(url.path, &info) == 0 else {
            return "cannot be read (\(String(cString: strerror(errno))))"
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG: return nil
        case S_IFIFO: return "a FIFO"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        case S_IFSOCK: return "a socket"
        default: return "not a regular file"
        }
    }

    // MARK: - Checking

    /// Reads every file's header and decodes and prepares it (keeping nothing), in parallel; returns
    /// the failures per file.
    static func checkAll(_ urls: [URL], preprocessing: ImagePreprocessing, limits: ImageDecodingLimits,
                         budget: DecodeMemoryBudget) -> [UpdraftError?] {
        var failures = [UpdraftError?](repeating: nil, count: urls.count)
        failures.withUnsafeMutableBufferPointer { errors in
            let errors = errors  // each iteration writes only its own entry
            forkJoin(iterations: urls.count) { i in
                do {
                    let header = try ImageHeader(contentsOfFile: urls[i].path, limits: limits)
                    _ = try budget.withReservation(header.decodeBytes) {
                        preprocessing.prepare(try DecodedImage(contentsOfFile: urls[i].path, limits: limits,
                                                               atLeast: preprocessing.decodeAtLeast))
                    }
                } catch let error as UpdraftError {
                    errors[i] = error
                } catch {
                    errors[i] = UpdraftError(.data, "cannot decode image '\(urls[i].path)': \(error)")
                }
            }
        }
        return failures
    }
}

/// Prepared images kept in memory up to a budget, filled as they are first decoded: one arena of
/// `capacity` slots (its pages touched only as slots fill), so keeping an image allocates nothing.
final class PreparedImageCache: @unchecked Sendable {
    private let lock = NSLock()
    /// Each example's slot in the arena, or -1.
    private var slotOf: [Int32]
    private let arena: UnsafeMutablePointer<UInt8>
    private let itemBytes: Int
    private let capacity: Int
    private(set) var stored = 0

    init(count: Int, itemBytes: Int, budgetBytes: Int) {
        self.itemBytes = itemBytes
        capacity = min(count, budgetBytes / max(1, itemBytes), Int(Int32.max))
        slotOf = [Int32](repeating: -1, count: count)
        arena = .allocate(capacity: max(1, capacity * itemBytes))
    }

    deinit { arena.deallocate() }

    var bytes: Int { lock.lock(); defer { lock.unlock() }; return stored * itemBytes }

    /// Copies example `index`'s samples into `out` (`itemBytes` of them); false when not held.
    func copy(at index: Int, into out: UnsafeMutableBufferPointer<UInt8>) -> Bool {
        lock.lock()
        let slot = slotOf[index]
        lock.unlock()
        guard slot >= 0, out.count == itemBytes else { return false }
        // A slot is written once, before it is published, and never changes after.
        out.baseAddress!.update(from: arena + Int(slot) * itemBytes, count: itemBytes)
        return true
    }

    /// Keeps a copy of example `index`'s samples while there is room.
    func store(_ samples: UnsafeBufferPointer<UInt8>, at index: Int) {
        guard samples.count == itemBytes else { return }
        lock.lock(); defer { lock.unlock() }
        guard slotOf[index] < 0, stored < capacity else { return }
        (arena + stored * itemBytes).update(from: samples.baseAddress!, count: itemBytes)
        slotOf[index] = Int32(stored)
        stored += 1
    }
}
