/// The interface of a model (ModelDescription, FeatureDescription, FeatureType): what goes in,
/// what comes out, and what training needs.

/// ImageFeatureType.colorSpace.
public enum ImageColorSpace: Hashable, Sendable, CustomStringConvertible {
    /// GRAYSCALE (10), RGB (20), BGR (30) and GRAYSCALE_FLOAT16 (40): one 8-bit gray channel, three 8-bit channels in RGB or BGR order, or one Float16 gray channel.
    case grayscale, rgb, bgr, grayscaleFloat16
    /// A ColorSpace number Updraft does not know, kept so the model writes back unchanged.
    case other(Int32)

    /// The color space for an ImageFeatureType.ColorSpace number (10 GRAYSCALE, 20 RGB, 30 BGR, 40 GRAYSCALE_FLOAT16); any other number becomes `.other`.
    public init(rawValue: Int32) {
        switch rawValue {
        case 10: self = .grayscale
        case 20: self = .rgb
        case 30: self = .bgr
        case 40: self = .grayscaleFloat16
        default: self = .other(rawValue)
        }
    }

    /// The ImageFeatureType.ColorSpace number written to the file.
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

    /// The Core ML enum name (`RGB`, `GRAYSCALE`, …), or "unknown color space N".
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

/// ImageFeatureType: an image input or output of a fixed pixel size and color space.
public struct ImageFeatureType: Hashable, Sendable {
    /// Image width in pixels (ImageFeatureType.width).
    public var width: Int
    /// Image height in pixels (ImageFeatureType.height).
    public var height: Int
    /// How pixels become channels (ImageFeatureType.colorSpace).
    public var colorSpace: ImageColorSpace
    /// The model also accepts other sizes (enumeratedSizes / imageSizeRange); Updraft uses width x height.
    public var hasFlexibleSize: Bool

    /// An image type of `width` x `height` pixels; sizes are not checked here.
    public init(width: Int, height: Int, colorSpace: ImageColorSpace, hasFlexibleSize: Bool = false) {
        self.width = width; self.height = height; self.colorSpace = colorSpace; self.hasFlexibleSize = hasFlexibleSize
    }
}

/// ArrayFeatureType.dataType.
public enum ArrayDataType: Hashable, Sendable, CustomStringConvertible {
    /// FLOAT32 (65568), DOUBLE (65600), INT32 (131104), FLOAT16 (65552) and INT8 (131080): the element type of a multi-array feature.
    case float32, double, int32, float16, int8
    /// An ArrayDataType number Updraft does not know, kept so the model writes back unchanged.
    case other(Int32)

    /// The data type for an ArrayFeatureType.ArrayDataType number (65568 FLOAT32, 65600 DOUBLE, 131104 INT32, 65552 FLOAT16, 131080 INT8); any other number becomes `.other`.
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

    /// The ArrayFeatureType.ArrayDataType number written to the file.
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

    /// The Core ML enum name (`FLOAT32`, …), `INVALID` for 0, or "unknown data type N".
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

/// ArrayFeatureType: a multi-array input or output.
public struct ArrayFeatureType: Hashable, Sendable {
    /// ArrayFeatureType.shape: the array's dimensions, outermost first (e.g. `[C, H, W]`).
    public var shape: [Int]
    /// Element type of the array (ArrayFeatureType.dataType).
    public var dataType: ArrayDataType
    /// The model also accepts other shapes (enumeratedShapes / shapeRange); Updraft uses `shape`.
    public var hasFlexibleShape: Bool

    /// A multi-array type of `shape` and `dataType`.
    public init(shape: [Int], dataType: ArrayDataType, hasFlexibleShape: Bool = false) {
        self.shape = shape; self.dataType = dataType; self.hasFlexibleShape = hasFlexibleShape
    }
}

/// DictionaryFeatureType's key type; values are always Double (a classifier's probabilities).
public enum DictionaryKeyType: String, Hashable, Sendable { case int64, string }

/// FeatureType's oneof.
public enum FeatureType: Hashable, Sendable, CustomStringConvertible {
    /// FeatureType.int64Type: a single 64-bit integer (e.g. a classifier's predicted class index).
    case int64
    /// FeatureType.doubleType: a single Double.
    case double
    /// FeatureType.stringType: a single string (e.g. a classifier's predicted label).
    case string
    /// FeatureType.imageType: an image of the given size and color space, fed to the network as a C x H x W tensor.
    case image(ImageFeatureType)
    /// FeatureType.multiArrayType: an N-dimensional array with the given shape and element type.
    case multiArray(ArrayFeatureType)
    /// FeatureType.dictionaryType: a dictionary from int64 or string keys to Double (a classifier's class probabilities).
    case dictionary(DictionaryKeyType)
    /// A type Updraft reads past (sequenceType, stateType, or a newer one): its FeatureType field name.
    case unsupported(String)

    /// A readable summary, e.g. `Image (RGB 227x227)` or `MultiArray (FLOAT32 3x32x32)`.
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

/// FeatureDescription: one named input, output or training input and its type.
public struct FeatureDescription: Hashable, Sendable {
    /// The feature's name, as the network's blobs and callers' feature providers refer to it.
    public var name: String
    /// Free-text description shown by Xcode (FeatureDescription.shortDescription); may be empty.
    public var shortDescription: String
    /// What values the feature holds (FeatureDescription.type).
    public var type: FeatureType
    /// FeatureType.isOptional: whether a caller may leave the feature out.
    public var isOptional: Bool

    /// A feature description; `shortDescription` defaults to empty and `isOptional` to false.
    public init(name: String, type: FeatureType, shortDescription: String = "", isOptional: Bool = false) {
        self.name = name; self.type = type; self.shortDescription = shortDescription; self.isOptional = isOptional
    }
}

/// Metadata: free text about the model, and user-defined key/value pairs (in file order).
public struct ModelMetadata: Hashable, Sendable {
    /// Metadata.shortDescription: what the model does; empty when unset.
    public var shortDescription = ""
    /// Metadata.versionString: the model's version, free text; empty when unset.
    public var versionString = ""
    /// Metadata.author; empty when unset.
    public var author = ""
    /// Metadata.license; empty when unset.
    public var license = ""
    /// Metadata.userDefined: key/value pairs in file order (duplicates kept).
    public var userDefined: [KeyValue] = []

    /// One Metadata.userDefined entry.
    public struct KeyValue: Hashable, Sendable {
        /// The entry's key.
        public var key: String
        /// The entry's value, as free text.
        public var value: String
        /// A user-defined entry `key` = `value`.
        public init(key: String, value: String) { self.key = key; self.value = value }
    }

    /// Metadata; every field defaults to empty.
    public init(shortDescription: String = "", versionString: String = "", author: String = "", license: String = "",
                userDefined: [KeyValue] = []) {
        self.shortDescription = shortDescription; self.versionString = versionString
        self.author = author; self.license = license; self.userDefined = userDefined
    }

    /// True when no metadata field is set (nothing to write).
    public var isEmpty: Bool {
        shortDescription.isEmpty && versionString.isEmpty && author.isEmpty && license.isEmpty && userDefined.isEmpty
    }
}

/// ModelDescription: the model's prediction inputs and outputs, training inputs and metadata.
public struct ModelDescription: Hashable, Sendable {
    /// ModelDescription.input: the prediction inputs, in file order (Updraft trains on the first).
    public var inputs: [FeatureDescription]
    /// ModelDescription.output: the prediction outputs, in file order.
    public var outputs: [FeatureDescription]
    /// The features an update task's examples carry: the prediction inputs plus the loss target.
    public var trainingInputs: [FeatureDescription]
    /// A classifier's label output.
    public var predictedFeatureName: String
    /// A classifier's probabilities output (a dictionary label -> probability).
    public var predictedProbabilitiesName: String
    /// ModelDescription.metadata: author, license, version and user-defined pairs.
    public var metadata: ModelMetadata

    /// A model description; training inputs, classifier output names and metadata default to empty.
    public init(inputs: [FeatureDescription], outputs: [FeatureDescription], trainingInputs: [FeatureDescription] = [],
                predictedFeatureName: String = "", predictedProbabilitiesName: String = "",
                metadata: ModelMetadata = ModelMetadata()) {
        self.inputs = inputs; self.outputs = outputs; self.trainingInputs = trainingInputs
        self.predictedFeatureName = predictedFeatureName; self.predictedProbabilitiesName = predictedProbabilitiesName
        self.metadata = metadata
    }

    /// The prediction input named `name`, or nil.
    public func input(named name: String) -> FeatureDescription? { inputs.first { $0.name == name } }
    /// The prediction output named `name`, or nil.
    public func output(named name: String) -> FeatureDescription? { outputs.first { $0.name == name } }
    /// The training input named `name`, or nil.
    public func trainingInput(named name: String) -> FeatureDescription? { trainingInputs.first { $0.name == name } }
}
