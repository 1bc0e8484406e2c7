import Foundation

/// Training or evaluation data for a model, from a path: an image folder (one subfolder per class)
/// for image models, or for multi-array models a folder holding `inputs.npy` and `targets.npy`.
/// Images are prepared to the model's size and color space but not scaled: the model's own image
/// scaler is applied by the executor, as Core ML applies it inside the model.
public struct ModelDataset {
    public let provider: BatchProvider
    public let warnings: [String]
    public let summary: String

    public init(model: CoreMLModel, path: URL, skipUnreadable: Bool = false) throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path.path, isDirectory: &isDirectory) else {
            let problem = pathProblem(path, expectingFile: false)
            throw UpdraftError(.io, "cannot read the data \(path.path): \(problem.message)",
                               hint: problem.message == "it does not exist"
                                   ? "give a folder with one subfolder per class (images) or inputs.npy and targets.npy" : problem.hint)
        }
        if let image = model.inputImage {
            let pre = try ImagePreprocessing(image: image, scaler: nil)
            let labels = model.classLabels?.asStrings
            let ds = try ImageFolderDataset(root: path, preprocessing: pre, classLabels: labels, skipUnreadable: skipUnreadable)
            provider = ds
            warnings = ds.warnings
            summary = ds.summary
            return
        }
        guard let shape = model.inputArrayShape else {
            throw UpdraftError(.unsupported, "the model's input is neither an image nor a multi-array")
        }
        let folder = isDirectory.boolValue ? path : path.deletingLastPathComponent()
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
