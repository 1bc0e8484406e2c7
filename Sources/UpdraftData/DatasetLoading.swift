import Foundation
import UpdraftCore
import UpdraftModel

/// How image data is read and prepared, beyond what the model fixes (size, color space, scaler).
public struct ImageDataOptions: Equatable, Sendable {
    /// How an image is fitted to the model's input size; default `.stretch` (ignore the aspect ratio).
    public var resize: ImagePreprocessing.Resize = .stretch
    /// The antialiased resampling filter for resizing; default `.triangle`.
    public var filter: ResampleFilter = .triangle
    /// JPEG DCT-domain scaling when the image is large enough (see `ImagePreprocessing.dctScaling`).
    public var dctScaling = true
    /// Caps on image dimensions and pixels a decoder accepts; default `.default`.
    public var limits: ImageDecodingLimits = .default
    /// Memory for prepared images; nil: all of them when they fit in 512 MiB, else none.
    public var imageCacheBytes: Int?
    /// Decode every image once at listing and skip unreadable ones with a warning.
    public var skipUnreadable = false
    /// The defaults: stretch, triangle filter, DCT scaling on, default limits, automatic image cache, unreadable images are errors.
    public init() {}
}

/// Training or evaluation data for a model, from a path: an image folder (one subfolder per class)
/// or a labels file (`.csv` of path,label rows) for image models, or for multi-array models a folder
/// holding `inputs.npy` and `targets.npy`, or `inputs.npy` and `labels.txt` (`LabelledArrays`: the
/// labels themselves; a k-NN's data always reads as labels, new ones added). Images are prepared to the model's size and color space
/// but not scaled: the model's own image scaler is applied by the executor, as Core ML applies it
/// inside the model. Nothing is decoded here: image data sets stream (see `ImageFolderDataset`).
public struct ModelDataset {
    /// The examples, ready to hand to `UpdateTask` or an evaluation (an `ImageFolderDataset` or `NpyDataset`).
    public let provider: BatchProvider
    /// One line per image skipped or problem found while listing (empty for `.npy` data).
    public let warnings: [String]
    /// One line saying how many examples and classes were found, and where.
    public let summary: String

    /// As `init(model:path:options:)` with default options, except `skipUnreadable`.
    public init(model: CoreMLModel, path: URL, skipUnreadable: Bool = false) throws {
        var options = ImageDataOptions()
        options.skipUnreadable = skipUnreadable
        try self.init(model: model, path: path, options: options)
    }

    /// Lists the data at `path` for `model`: an image folder or labels `.csv` for an image input, else a folder with `inputs.npy`/`targets.npy`. Throws `.io` when the path cannot be read, `.unsupported` for an input that is neither an image nor a multi-array, and the data set's own errors.
    public init(model: CoreMLModel, path: URL, options: ImageDataOptions) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path.path, isDirectory: &isDirectory) else {
            let problem = pathProblem(path, expectingFile: false)
            throw UpdraftError(.io, "cannot read the data \(path.path): \(problem.message)",
                               hint: problem.message == "it does not exist"
                                   ? "give a folder with one subfolder per class (images), a labels .csv, or a folder with inputs.npy and targets.npy" : problem.hint)
        }
        if let image = model.inputImage {
            var pre = try ImagePreprocessing(image: image, scaler: nil)
            pre.resize = options.resize
            pre.filter = options.filter
            pre.dctScaling = options.dctScaling
            var labels = model.classLabels?.asStrings
            if Self.kNearestNeighbors(learningIn: model.spec) != nil, isDirectory.boolValue {
                // A k-NN learns the classes it does not know yet: they follow its own labels.
                var ignored: [String] = []
                let known = Set(labels ?? [])
                labels = (labels ?? []) + (try ImageFolderDataset.classFolders(in: path, warnings: &ignored)).filter { !known.contains($0) }
            }
            let ds: ImageFolderDataset
            if !isDirectory.boolValue && path.pathExtension.lowercased() == "csv" {
                ds = try ImageFolderDataset(labelsCSV: path, preprocessing: pre, classLabels: labels, skipUnreadable: options.skipUnreadable,
                                            limits: options.limits, imageCacheBytes: options.imageCacheBytes)
            } else {
                ds = try ImageFolderDataset(root: path, preprocessing: pre, classLabels: labels, skipUnreadable: options.skipUnreadable,
                                            limits: options.limits, imageCacheBytes: options.imageCacheBytes)
            }
            provider = ds
            warnings = ds.warnings
            summary = ds.summary
            return
        }
        guard let shape = model.inputArrayShape else {
            throw UpdraftError(.unsupported, "the model's input is neither an image nor a multi-array")
        }
        let folder = isDirectory.boolValue ? path : path.deletingLastPathComponent()
        // Labels rather than class indices: labels.txt for any classifier; for a k-NN (which learns
        // new labels, and reads an int64 targets.npy as its labels) always.
        let knn = Self.kNearestNeighbors(learningIn: model.spec)
        if knn != nil || FileManager.default.fileExists(atPath: folder.appendingPathComponent(LabelledArrays.labelsFileName).path) {
            let ds = try LabelledArrays(folder: folder, exampleShape: Shape(shape), modelLabels: model.classLabels, labelType: knn?.labelType,
                                        learnsNewLabels: knn != nil, labelValuedTargets: knn?.labelType == "int64")
            provider = ds
            warnings = []
            summary = ds.summary + " in \(folder.path)"
            return
        }
        let inputs = folder.appendingPathComponent("inputs.npy"), targets = folder.appendingPathComponent("targets.npy")
        // A classifier's targets are class indices whatever their dtype: whole floats are read as
        // indices, and a fraction is an error naming the file and the row (not a failure at the first batch).
        let ds = try NpyDataset(inputs: inputs, targets: targets, exampleShape: Shape(shape),
                                targetKind: model.classLabels != nil ? .classIndices : .automatic,
                                classCount: model.classLabels?.count)
        provider = ds
        warnings = []
        summary = "\(ds.count) examples from \(inputs.lastPathComponent) and \(targets.lastPathComponent) in \(folder.path)"
    }
}

extension ModelDataset {
    /// The k-NN that learns from a model's data: the model itself, or a pipeline's last model (its
    /// updatable one); nil for other models.
    public static func kNearestNeighbors(learningIn spec: ModelSpec) -> KNearestNeighborsSpec? {
        switch spec.body {
        case let .kNearestNeighbors(k): return k
        case let .pipeline(p): return p.models.last.flatMap(kNearestNeighbors(learningIn:))
        case .neuralNetwork, .family: return nil
        }
    }
}
