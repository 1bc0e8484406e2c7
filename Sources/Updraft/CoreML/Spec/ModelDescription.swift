/// The interface of a model (ModelDescription, FeatureDescription, FeatureType): what goes in,
/// what comes out, and what training needs.

/// ImageFeatureType.colorSpace.
public enum ImageColorSpace: Hashable, Sendable, CustomStringConvertible {
    case grayscale, rgb, bgr, grayscaleFloat16
    case other(Int32)

    public init(rawValue: Int32) {
        switch rawValue {
        case 10: self = .grayscale
        case 20: self = .rgb
        case 30: self = .bgr
        case 40: self = .grayscaleFloat16
        default: self = .other(rawValue)
        }
    }

    public var rawValue: Int32 {
        switch self {
        case .grayscale: return 10
        case .rgb: return 20
        case .bgr: return 30
        case .grayscaleFloat16: return 40
        case let .other(v): return v
        }
    }

    /// Channels the image becomes (1 or 3), nil for an unknown color space.
    public var channels: Int? {
        switch self {
        case .grayscale, .grayscaleFloat16: return 1
        case .rgb, .bgr: return 3
        case .other: return nil
        }
    }

    public var description: String {
        switch self {
        case .grayscale: return "GRAYSCALE"
        case .rgb: return "RGB"
        case .bgr: return "BGR"
        case .grayscaleFloat16: return "GRAYSCALE_FLOAT16"
        case let .other(v): return "unknown color space \(v)"
        }
    }
}

public struct ImageFeatureType: Hashable, Sendable {
    public var width: Int
    public var height: Int
    public var colorSpace: ImageColorSpace
    /// The model also accepts other sizes (enumeratedSizes / imageSizeRange); Updraft uses width x height.
    public var hasFlexibleSize: Bool

    public init(width: Int, height: Int, colorSpace: ImageColorSpace, hasFlexibleSize: Bool = false) {
        self.width = width; self.height = height; self.colorSpace = colorSpace; self.hasFlexibleSize = hasFlexibleSize
    }
}

/// ArrayFeatureType.dataType.
public enum ArrayDataType: Hashable, Sendable, CustomStringConvertible {
    case float32, double, int32, float16, int8
    case other(Int32)

    public init(rawValue: Int32) {
        switch rawValue {
        case 65568: self = .float32
        case 65600: self = .double
        case 131104: self = .int32
        case 65552: self = .float16
        case 131080: self = .int8
        default: self = .other(rawValue)
        }
    }

    public var rawValue: Int32 {
        switch self {
        case .float32: return 65568
        case .double: return 65600
        case .int32: return 131104
        case .float16: return 65552
        case .int8: return 131080
        case let .other(v): return v
        }
    }

    public var description: String {
        switch self {
        case .float32: return "FLOAT32"
        case .double: return "DOUBLE"
        case .int32: return "INT32"
        case .float16: return "FLOAT16"
        case .int8: return "INT8"
        case let .other(v): return v == 0 ? "INVALID" : "unknown data type \(v)"
        }
    }
}

public struct ArrayFeatureType: Hashable, Sendable {
    public var shape: [Int]
    public var dataType: ArrayDataType
    /// The model also accepts other shapes (enumeratedShapes / shapeRange); Updraft uses `shape`.
    public var hasFlexibleShape: Bool

    public init(shape: [Int], dataType: ArrayDataType, hasFlexibleShape: Bool = false) {
        self.shape = shape; self.dataType = dataType; self.hasFlexibleShape = hasFlexibleShape
    }
}

public enum DictionaryKeyType: String, Hashable, Sendable { case int64, string }

/// FeatureType's oneof.
public enum FeatureType: Hashable, Sendable, CustomStringConvertible {
    case int64
    case double
    case string
    case image(ImageFeatureType)
    case multiArray(ArrayFeatureType)
    case dictionary(DictionaryKeyType)
    /// A type Updraft reads past (sequenceType, stateType, or a newer one): its FeatureType field name.
    case unsupported(String)

    public var description: String {
        switch self {
        case .int64: return "Int64"
        case .double: return "Double"
        case .string: return "String"
        case let .image(t):
            return "Image (\(t.colorSpace) \(t.width)x\(t.height)\(t.hasFlexibleSize ? ", flexible size" : ""))"
        case let .multiArray(t):
            return "MultiArray (\(t.dataType) \(t.shape.map(String.init).joined(separator: "x")))"
        case let .dictionary(k): return "Dictionary (\(k == .string ? "String" : "Int64") -> Double)"
        case let .unsupported(name): return "\(name) (not supported by Updraft)"
        }
    }
}

public struct FeatureDescription: Hashable, Sendable {
    public var name: String
    public var shortDescription: String
    public var type: FeatureType
    public var isOptional: Bool

    public init(name: String, type: FeatureType, shortDescription: String = "", isOptional: Bool = false) {
        self.name = name; self.type = type; self.shortDescription = shortDescription; self.isOptional = isOptional
    }
}

/// Metadata: free text about the model, and user-defined key/value pairs (in file order).
public struct ModelMetadata: Hashable, Sendable {
    public var shortDescription = ""
    public var versionString = ""
    public var author = ""
    public var license = ""
    public var userDefined: [KeyValue] = []

    public struct KeyValue: Hashable, Sendable {
        public var key: String
        public var value: String
        public init(key: String, value: String) { self.key = key; self.value = value }
    }

    public init(shortDescription: String = "", versionString: String = "", author: String = "", license: String = "",
                userDefined: [KeyValue] = []) {
        self.shortDescription = shortDescription; self.versionString = versionString
        self.author = author; self.license = license; self.userDefined = userDefined
    }

    public var isEmpty: Bool {
        shortDescription.isEmpty && versionString.isEmpty && author.isEmpty && license.isEmpty && userDefined.isEmpty
    }
}

public struct ModelDescription: Hashable, Sendable {
    public var inputs: [FeatureDescription]
    public var outputs: [FeatureDescription]
    /// The features an update task's examples carry: the prediction inputs plus the loss target.
    public var trainingInputs: [FeatureDescription]
    /// A classifier's label output.
    public var predictedFeatureName: String
    /// A classifier's probabilities output (a dictionary label -> probability).
    public var predictedProbabilitiesName: String
    public var metadata: ModelMetadata

    public init(inputs: [FeatureDescription], outputs: [FeatureDescription], trainingInputs: [FeatureDescription] = [],
                predictedFeatureName: String = "", predictedProbabilitiesName: String = "",
                metadata: ModelMetadata = ModelMetadata()) {
        self.inputs = inputs; self.outputs = outputs; self.trainingInputs = trainingInputs
        self.predictedFeatureName = predictedFeatureName; self.predictedProbabilitiesName = predictedProbabilitiesName
        self.metadata = metadata
    }

    public func input(named name: String) -> FeatureDescription? { inputs.first { $0.name == name } }
    public func output(named name: String) -> FeatureDescription? { outputs.first { $0.name == name } }
    public func trainingInput(named name: String) -> FeatureDescription? { trainingInputs.first { $0.name == name } }
}
