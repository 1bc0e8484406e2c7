import Foundation
import UpdraftCore
import UpdraftModel
import UpdraftData

/// A k-NN's samples and labels as files, in the form `updraft train` reads: a folder with
/// `inputs.npy` (float32 `[N, D]`, the samples in order) and `labels.txt` (one label per line, in
/// the same order). Exporting then importing into a k-NN with no samples gives the same samples
/// and labels back.
public enum KNearestNeighborsFiles {
    /// Writes `knn`'s samples to `folder/inputs.npy` and their labels to `folder/labels.txt`, each
    /// atomically (the folder is made when missing).
    /// - Throws: `.invalidArgument` for a string label holding a line break (labels.txt could not
    ///   give it back); `.io` when the files cannot be written.
    public static func export(_ knn: KNearestNeighborsSpec, to folder: URL) throws {
        let labels = knn.sampleLabelTexts
        if let bad = labels.firstIndex(where: { $0.contains(where: \.isNewline) }) {
            throw UpdraftError(.invalidArgument, "sample \(bad)'s label holds a line break, which labels.txt cannot hold",
                               hint: "rename the label first")
        }
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let array = NpyArray(shape: [knn.samples.count, Int(knn.dimension)], descr: "<f4", values: .float(knn.samples.flatMap { $0 }))
        try writeAtomically(array.serialized(), to: folder.appendingPathComponent("inputs.npy"))
        try writeAtomically(Data(labels.map { $0 + "\n" }.joined().utf8), to: folder.appendingPathComponent(LabelledArrays.labelsFileName))
    }

    /// `model` with the samples of `folder` (`inputs.npy` with `labels.txt` or `targets.npy`, read
    /// as `updraft train` reads them) appended to its k-NN, checked as `KNearestNeighborsSpec.append`
    /// checks them, and against protobuf's 2 GiB limit.
    public static func importing(from folder: URL, into model: CoreMLModel) throws -> CoreMLModel {
        guard let knn = model.kNearestNeighbors else {
            throw UpdraftError(.invalidModel, "this model is a \(model.spec.modelType.name), not a k-nearest-neighbors classifier")
        }
        let data = try LabelledArrays(folder: folder, exampleShape: nil, modelLabels: knn.distinctClassLabels, labelType: knn.labelType,
                                      learnsNewLabels: true, labelValuedTargets: knn.labelType == "int64")
        let labels = try data.labels(in: 0..<data.count)
        try model.checkKNearestNeighborsRoom(appending: labels, dimension: Int(knn.dimension))
        let (vectors, _) = try data.examples(in: 0..<data.count)
        let d = vectors.shape.dims.last ?? 0
        let rows = (0..<data.count).map { Array(vectors.data[$0 * d..<($0 + 1) * d]) }
        return try model.editingKNearestNeighbors { try $0.append(samples: rows, labels: labels) }
    }
}
