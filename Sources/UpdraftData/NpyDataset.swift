import Foundation
import UpdraftCore

/// Multi-array training data from two `.npy` files: inputs `[N, ...]` (float or integer; each example
/// is one row, shaped as the rest of the dimensions or as `exampleShape`) and targets with `N` rows,
/// integer class indices (`[N]` or `[N, 1]`) or float values (`[N, ...]`).
///
/// The inputs file is memory-mapped, not read: each example's row is converted when it is asked for,
/// so a large array costs page cache, not process memory. The targets file (one row per example) is
/// read whole.
public struct NpyDataset: BatchProvider, @unchecked Sendable {
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
    /// Number of examples: the inputs' first dimension (the targets have as many rows).
    public let count: Int
    /// The inputs: converted in memory, or rows read from a mapped file.
    private enum Inputs {
        /// Inputs converted to Float and held in memory.
        case values([Float])
        /// Inputs left in a mapped `.npy` file, converted row by row: the file's bytes, its element type, and where the data starts.
        case mapped(Data, type: NpyElementType, offset: Int)
    }
    private let inputs: Inputs
    /// Whether the inputs are memory-mapped (read per example) rather than held converted.
    public var isMapped: Bool { if case .mapped = inputs { return true } else { return false } }
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
        try self.init(inputs: inputs, targets: { try NpyArray(contentsOf: targets) }, targetsName: targets.path,
                      exampleShape: exampleShape, targetKind: targetKind, classCount: classCount)
    }

    /// Reads the `inputs` `.npy` file (memory-mapped, as `init(inputs:targets:...)`) with targets
    /// already in memory (`targetsName` names them in errors, e.g. a labels.txt mapped to class indices).
    public init(inputs: URL, targets: NpyArray, targetsName: String, exampleShape: Shape? = nil,
                targetKind: TargetKind = .automatic, classCount: Int? = nil) throws {
        try self.init(inputs: inputs, targets: { targets }, targetsName: targetsName,
                      exampleShape: exampleShape, targetKind: targetKind, classCount: classCount)
    }

    private init(inputs: URL, targets: () throws -> NpyArray, targetsName: String, exampleShape: Shape?,
                 targetKind: TargetKind, classCount: Int?) throws {
        let mapped: Data
        do {
            mapped = try Data(contentsOf: inputs, options: .alwaysMapped)
        } catch {
            throw UpdraftError(.io, "cannot read \(inputs.path): \(error.localizedDescription)",
                               hint: "check that the file exists and is a readable .npy file")
        }
        let name = inputs.path
        let (header, type) = try NpyHeader.checked(data: mapped, name: name)
        try self.init(shape: header.shape, storage: .mapped(mapped, type: type, offset: header.dataOffset), inputsName: name,
                      targets: targets(), targetsName: targetsName,
                      exampleShape: exampleShape, targetKind: targetKind, classCount: classCount)
    }

    /// Builds the dataset from parsed arrays; the names are used in error messages.
    public init(inputs: NpyArray, inputsName: String, targets: NpyArray, targetsName: String,
                exampleShape: Shape? = nil, targetKind: TargetKind = .automatic, classCount: Int? = nil) throws {
        let values: [Float]
        switch inputs.values {
        case .float(let v): values = v
        case .integer(let v): values = v.map(Float.init)
        }
        try self.init(shape: inputs.shape, storage: .values(values), inputsName: inputsName, targets: targets, targetsName: targetsName,
                      exampleShape: exampleShape, targetKind: targetKind, classCount: classCount)
    }

    private init(shape inputShape: [Int], storage: Inputs, inputsName: String, targets: NpyArray, targetsName: String,
                 exampleShape: Shape?, targetKind: TargetKind, classCount: Int?) throws {
        guard let n = inputShape.first else {
            throw UpdraftError(.data, "\(inputsName): inputs must have a first dimension of examples, got a 0-d array",
                               hint: "save an array of shape [N, ...]")
        }
        guard n > 0 else {
            throw UpdraftError(.data, "\(inputsName) has no examples (shape \(inputShape))")
        }
        guard targets.shape.first == n else {
            throw UpdraftError(.data, "\(targetsName) has \(targets.shape.first.map(String.init) ?? "no") rows, \(inputsName) has \(n)",
                               hint: "inputs and targets need one row per example, in the same order")
        }
        let rowShape = Shape(inputShape.count > 1 ? Array(inputShape.dropFirst()) : [1])
        if let exampleShape, exampleShape.count != rowShape.count {
            throw UpdraftError(.data, "\(inputsName): rows of shape \(rowShape) (\(rowShape.count) values) cannot be reshaped to the model's input \(exampleShape) (\(exampleShape.count) values)",
                               hint: "save inputs of shape [N] + \(exampleShape)")
        }
        self.exampleShape = exampleShape ?? rowShape
        self.count = n
        self.inputs = storage

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

    /// Row `index`'s class index or target values, without reading its input row.
    public func target(at index: Int) throws -> TrainingExample.Target {
        try checkIndex(index)
        if let targetShape {
            let t = targetShape.count
            return .values(Tensor(shape: targetShape, data: Array(valueTargets[index * t..<(index + 1) * t])))
        }
        return .classIndex(classTargets[index])
    }

    /// As `BatchProvider.example(at:)`: row `index` of the inputs converted to Float in `exampleShape`, with its class index or target values. Throws `.invalidArgument` for an index out of range.
    public func example(at index: Int) throws -> TrainingExample {
        try checkIndex(index)
        let size = exampleShape.count
        let row: [Float]
        switch inputs {
        case .values(let v):
            row = Array(v[index * size..<(index + 1) * size])
        case let .mapped(data, type, offset):
            let values = data.withUnsafeBytes { raw in
                type.read(UnsafeRawBufferPointer(rebasing: raw[(offset + index * size * type.size)...]), count: size)
            }
            switch values {
            case .float(let v): row = v
            case .integer(let v): row = v.map(Float.init)
            }
        }
        let input = Tensor(shape: exampleShape, data: row)
        if let targetShape {
            let t = targetShape.count
            return TrainingExample(input: input,
                                   target: .values(Tensor(shape: targetShape, data: Array(valueTargets[index * t..<(index + 1) * t]))))
        }
        return TrainingExample(input: input, target: .classIndex(classTargets[index]))
    }
}
