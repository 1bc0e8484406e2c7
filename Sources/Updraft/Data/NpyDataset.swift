import Foundation

/// Multi-array training data from two `.npy` files: inputs `[N, ...]` (float or integer; each example
/// is one row, shaped as the rest of the dimensions or as `exampleShape`) and targets with `N` rows,
/// integer class indices (`[N]` or `[N, 1]`) or float values (`[N, ...]`).
///
/// Both files are read into memory when the dataset is created.
public struct NpyDataset: BatchProvider, Sendable {
    /// How to read the targets file.
    public enum TargetKind: String, Sendable {
        /// Integer dtypes are class indices, float dtypes are values.
        case automatic
        /// Class indices; floats are accepted when they are whole numbers.
        case classIndices
        /// Values, whatever the dtype.
        case values
    }

    /// One example's input shape.
    public let exampleShape: Shape
    /// One example's target shape, for value targets; nil for class indices.
    public let targetShape: Shape?
    public let count: Int
    private let inputs: [Float]
    private let classTargets: [Int]
    private let valueTargets: [Float]

    /// Reads `inputs` and `targets` `.npy` files.
    /// - Parameters:
    ///   - exampleShape: the model input's shape, to reshape each row into (its element count must
    ///     match a row's); nil keeps the file's shape after the first dimension.
    ///   - classCount: when given, class indices must lie in `0..<classCount`.
    /// - Throws: `UpdraftError` naming the file: unreadable, not `.npy`, an unsupported dtype or
    ///   order, row counts that differ, or class indices out of range.
    public init(inputs: URL, targets: URL, exampleShape: Shape? = nil, targetKind: TargetKind = .automatic,
                classCount: Int? = nil) throws {
        try self.init(inputs: NpyArray(contentsOf: inputs), inputsName: inputs.path,
                      targets: NpyArray(contentsOf: targets), targetsName: targets.path,
                      exampleShape: exampleShape, targetKind: targetKind, classCount: classCount)
    }

    /// Builds the dataset from parsed arrays; the names are used in error messages.
    public init(inputs: NpyArray, inputsName: String, targets: NpyArray, targetsName: String,
                exampleShape: Shape? = nil, targetKind: TargetKind = .automatic, classCount: Int? = nil) throws {
        guard let n = inputs.shape.first else {
            throw UpdraftError(.data, "\(inputsName): inputs must have a first dimension of examples, got a 0-d array",
                               hint: "save an array of shape [N, ...]")
        }
        guard n > 0 else {
            throw UpdraftError(.data, "\(inputsName) has no examples (shape \(inputs.shape))")
        }
        guard targets.shape.first == n else {
            throw UpdraftError(.data, "\(targetsName) has \(targets.shape.first.map(String.init) ?? "no") rows, \(inputsName) has \(n)",
                               hint: "inputs and targets need one row per example, in the same order")
        }
        let rowShape = Shape(inputs.shape.count > 1 ? Array(inputs.shape.dropFirst()) : [1])
        if let exampleShape, exampleShape.count != rowShape.count {
            throw UpdraftError(.data, "\(inputsName): rows of shape \(rowShape) (\(rowShape.count) values) cannot be reshaped to the model's input \(exampleShape) (\(exampleShape.count) values)",
                               hint: "save inputs of shape [N] + \(exampleShape)")
        }
        self.exampleShape = exampleShape ?? rowShape
        self.count = n
        switch inputs.values {
        case .float(let v): self.inputs = v
        case .integer(let v): self.inputs = v.map(Float.init)
        }

        let isClass: Bool
        switch (targetKind, targets.values) {
        case (.automatic, .integer), (.classIndices, _): isClass = true
        default: isClass = false
        }
        if isClass {
            guard targets.shape.count == 1 || (targets.shape.count == 2 && targets.shape[1] == 1) else {
                throw UpdraftError(.data, "\(targetsName): class indices must have shape [N] or [N, 1], got \(targets.shape)",
                                   hint: "save one class index per example")
            }
            var indices: [Int] = []
            switch targets.values {
            case .integer(let v): indices = v
            case .float(let v):
                for (i, x) in v.enumerated() {
                    guard x == x.rounded(), let index = Int(exactly: x) else {
                        throw UpdraftError(.data, "\(targetsName): target \(i) is \(x), not a class index",
                                           hint: "class indices are whole numbers; save them as integers")
                    }
                    indices.append(index)
                }
            }
            let limit = classCount ?? Int.max
            if let bad = indices.firstIndex(where: { $0 < 0 || $0 >= limit }) {
                throw UpdraftError(.data, "\(targetsName): target \(bad) is class \(indices[bad]), outside 0..<\(classCount.map(String.init) ?? "∞")",
                                   hint: "class indices count from 0 in the order of the model's class labels")
            }
            self.classTargets = indices
            self.valueTargets = []
            self.targetShape = nil
        } else {
            self.classTargets = []
            switch targets.values {
            case .float(let v): self.valueTargets = v
            case .integer(let v): self.valueTargets = v.map(Float.init)
            }
            self.targetShape = Shape(targets.shape.count > 1 ? Array(targets.shape.dropFirst()) : [1])
        }
    }

    public func example(at index: Int) throws -> TrainingExample {
        try checkIndex(index)
        let size = exampleShape.count
        let input = Tensor(shape: exampleShape, data: Array(inputs[index * size..<(index + 1) * size]))
        if let targetShape {
            let t = targetShape.count
            return TrainingExample(input: input,
                                   target: .values(Tensor(shape: targetShape, data: Array(valueTargets[index * t..<(index + 1) * t]))))
        }
        return TrainingExample(input: input, target: .classIndex(classTargets[index]))
    }
}
