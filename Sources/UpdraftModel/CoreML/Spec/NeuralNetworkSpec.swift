/// The neural network part of a model: NeuralNetwork, NeuralNetworkClassifier or
/// NeuralNetworkRegressor, and the Model message around it.

/// Which of Model's neural network cases the file holds.
public enum NeuralNetworkKind: String, Hashable, Sendable {
    /// Model.neuralNetworkClassifier (field 403): a network with class labels whose outputs are the predicted label and the probability dictionary.
    case classifier = "neuralNetworkClassifier"
    /// Model.neuralNetworkRegressor (field 303): a network whose outputs are numeric predictions.
    case regressor = "neuralNetworkRegressor"
    /// Model.neuralNetwork (field 500): a plain network whose outputs are the layers' tensors.
    case plain = "neuralNetwork"

    /// The Model oneof case that holds the network.
    public var modelType: CoreMLModelType {
        switch self {
        case .classifier: return .neuralNetworkClassifier
        case .regressor: return .neuralNetworkRegressor
        case .plain: return .neuralNetwork
        }
    }

    /// Model's oneof field number.
    public var fieldNumber: Int { modelType.rawValue }
}

/// NeuralNetworkImageScaler: y[c] = channelScale * x[c] + bias[c] on pixel values 0...255.
public struct ImageScaler: Hashable, Sendable {
    /// NeuralNetworkImageScaler.channelScale: multiplies every pixel value (e.g. 1/255 maps pixels to 0...1).
    public var channelScale: Float
    /// Added to the red channel after scaling (RGB and BGR images).
    public var redBias: Float
    /// Added to the green channel after scaling (RGB and BGR images).
    public var greenBias: Float
    /// Added to the blue channel after scaling (RGB and BGR images).
    public var blueBias: Float
    /// Added to the single channel after scaling (grayscale images).
    public var grayBias: Float

    /// A scaler; the biases default to 0.
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
    /// NeuralNetworkPreprocessing.featureName: the input this applies to; empty means the model's only input.
    public var featureName: String
    /// The image scaler (the preprocessor oneof's scaler case); nil when the entry has none.
    public var scaler: ImageScaler?
    /// meanImage (11) is present: Updraft reads past it but does not apply it.
    public var hasMeanImage: Bool

    /// Preprocessing for `featureName`.
    public init(featureName: String, scaler: ImageScaler?, hasMeanImage: Bool = false) {
        self.featureName = featureName; self.scaler = scaler; self.hasMeanImage = hasMeanImage
    }
}

/// A classifier's labels, in output order.
public enum ClassLabels: Hashable, Sendable {
    /// NeuralNetworkClassifier.stringClassLabels: labels are strings (the predicted-label output is a String feature).
    case strings([String])
    /// NeuralNetworkClassifier.int64ClassLabels: labels are integers (the predicted-label output is an Int64 feature).
    case int64([Int64])

    /// String labels "0", "1", ... "count-1".
    public static func numbered(_ count: Int) -> ClassLabels { .strings((0..<count).map(String.init)) }

    /// Number of classes.
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

/// The network message (NeuralNetwork, NeuralNetworkClassifier or NeuralNetworkRegressor): layers, preprocessing, training setup.
public struct NeuralNetworkSpec: Hashable, Sendable {
    /// Which Model case holds the network.
    public var kind: NeuralNetworkKind
    /// The layers, in file order (Core ML runs them in an order that respects their blobs).
    public var layers: [LayerSpec]
    /// NeuralNetwork.preprocessing: per-input image scalers.
    public var preprocessing: [PreprocessingSpec]
    /// NeuralNetwork.updateParams: training configuration; nil for a model that is not updatable.
    public var updateParameters: UpdateParameters?
    /// Classifiers only.
    public var classLabels: ClassLabels?
    /// Classifiers only: the blob holding the probabilities ("" means the last layer's output).
    public var labelProbabilityLayerName: String
    /// NeuralNetworkMultiArrayShapeMapping (RANK5_ARRAY_MAPPING = 0, EXACT_ARRAY_MAPPING = 1).
    public var arrayInputShapeMapping: Int32
    /// NeuralNetworkImageShapeMapping (RANK5_IMAGE_MAPPING = 0, RANK4_IMAGE_MAPPING = 1).
    public var imageInputShapeMapping: Int32

    /// A network; everything but `kind` and `layers` defaults to absent, shape mappings to 0 (rank 5).
    public init(kind: NeuralNetworkKind, layers: [LayerSpec], preprocessing: [PreprocessingSpec] = [],
                updateParameters: UpdateParameters? = nil, classLabels: ClassLabels? = nil,
                labelProbabilityLayerName: String = "", arrayInputShapeMapping: Int32 = 0, imageInputShapeMapping: Int32 = 0) {
        self.kind = kind; self.layers = layers; self.preprocessing = preprocessing
        self.updateParameters = updateParameters; self.classLabels = classLabels
        self.labelProbabilityLayerName = labelProbabilityLayerName
        self.arrayInputShapeMapping = arrayInputShapeMapping; self.imageInputShapeMapping = imageInputShapeMapping
    }

    /// The first layer named `name`, or nil.
    public func layer(named name: String) -> LayerSpec? { layers.first { $0.name == name } }
}
