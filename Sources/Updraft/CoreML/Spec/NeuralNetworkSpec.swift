/// The neural network part of a model: NeuralNetwork, NeuralNetworkClassifier or
/// NeuralNetworkRegressor, and the Model message around it.

/// Which of Model's neural network cases the file holds.
public enum NeuralNetworkKind: String, Hashable, Sendable {
    case classifier = "neuralNetworkClassifier"
    case regressor = "neuralNetworkRegressor"
    case plain = "neuralNetwork"

    /// Model's oneof field number.
    public var fieldNumber: Int {
        switch self {
        case .classifier: return 403
        case .regressor: return 303
        case .plain: return 500
        }
    }
}

/// NeuralNetworkImageScaler: y[c] = channelScale * x[c] + bias[c] on pixel values 0...255.
public struct ImageScaler: Hashable, Sendable {
    public var channelScale: Float
    public var redBias: Float
    public var greenBias: Float
    public var blueBias: Float
    public var grayBias: Float

    public init(channelScale: Float, redBias: Float = 0, greenBias: Float = 0, blueBias: Float = 0, grayBias: Float = 0) {
        self.channelScale = channelScale; self.redBias = redBias; self.greenBias = greenBias
        self.blueBias = blueBias; self.grayBias = grayBias
    }

    /// Per-channel biases in the order the image's channels reach the network.
    public func biases(for colorSpace: ImageColorSpace) -> [Float] {
        switch colorSpace {
        case .rgb: return [redBias, greenBias, blueBias]
        case .bgr: return [blueBias, greenBias, redBias]
        case .grayscale, .grayscaleFloat16: return [grayBias]
        case .other: return []
        }
    }
}

/// NeuralNetworkPreprocessing for one input feature ("" means the only input).
public struct PreprocessingSpec: Hashable, Sendable {
    public var featureName: String
    public var scaler: ImageScaler?
    /// meanImage (11) is present: Updraft reads past it but does not apply it.
    public var hasMeanImage: Bool

    public init(featureName: String, scaler: ImageScaler?, hasMeanImage: Bool = false) {
        self.featureName = featureName; self.scaler = scaler; self.hasMeanImage = hasMeanImage
    }
}

/// A classifier's labels, in output order.
public enum ClassLabels: Hashable, Sendable {
    case strings([String])
    case int64([Int64])

    public var count: Int {
        switch self {
        case let .strings(s): return s.count
        case let .int64(v): return v.count
        }
    }

    /// Labels as text (int64 labels in decimal).
    public var asStrings: [String] {
        switch self {
        case let .strings(s): return s
        case let .int64(v): return v.map(String.init)
        }
    }

    /// The class index of a label given as text, nil if it is not a label.
    public func index(of label: String) -> Int? {
        switch self {
        case let .strings(s): return s.firstIndex(of: label)
        case let .int64(v): return Int64(label).flatMap { v.firstIndex(of: $0) }
        }
    }
}

public struct NeuralNetworkSpec: Hashable, Sendable {
    public var kind: NeuralNetworkKind
    public var layers: [LayerSpec]
    public var preprocessing: [PreprocessingSpec]
    public var updateParameters: UpdateParameters?
    /// Classifiers only.
    public var classLabels: ClassLabels?
    /// Classifiers only: the blob holding the probabilities ("" means the last layer's output).
    public var labelProbabilityLayerName: String
    /// NeuralNetworkMultiArrayShapeMapping (RANK5_ARRAY_MAPPING = 0, EXACT_ARRAY_MAPPING = 1).
    public var arrayInputShapeMapping: Int32
    /// NeuralNetworkImageShapeMapping (RANK5_IMAGE_MAPPING = 0, RANK4_IMAGE_MAPPING = 1).
    public var imageInputShapeMapping: Int32

    public init(kind: NeuralNetworkKind, layers: [LayerSpec], preprocessing: [PreprocessingSpec] = [],
                updateParameters: UpdateParameters? = nil, classLabels: ClassLabels? = nil,
                labelProbabilityLayerName: String = "", arrayInputShapeMapping: Int32 = 0, imageInputShapeMapping: Int32 = 0) {
        self.kind = kind; self.layers = layers; self.preprocessing = preprocessing
        self.updateParameters = updateParameters; self.classLabels = classLabels
        self.labelProbabilityLayerName = labelProbabilityLayerName
        self.arrayInputShapeMapping = arrayInputShapeMapping; self.imageInputShapeMapping = imageInputShapeMapping
    }

    public func layer(named name: String) -> LayerSpec? { layers.first { $0.name == name } }
}

/// The parts of Model that Updraft understands. Everything else in the file is kept as bytes by
/// `CoreMLModel` and written back unchanged.
public struct ModelSpec: Hashable, Sendable {
    public var specificationVersion: Int32
    public var description: ModelDescription
    public var isUpdatable: Bool
    public var network: NeuralNetworkSpec

    public init(specificationVersion: Int32, description: ModelDescription, isUpdatable: Bool, network: NeuralNetworkSpec) {
        self.specificationVersion = specificationVersion; self.description = description
        self.isUpdatable = isUpdatable; self.network = network
    }
}
