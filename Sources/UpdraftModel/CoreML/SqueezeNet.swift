import UpdraftCore

/// SqueezeNet 1.1 as an updatable Core ML classifier (torchvision's squeezenet1_1 layout, Caffe's
/// layer names), ready to fine-tune: 227x227 RGB image input scaled by 1/255, conv10 and a new
/// fullyconnected0 head to N classes, cross-entropy loss, SGD.
///
///     conv1 3x3/2 64 + ReLU, pool1 (max 3x3/2, ceil mode)
///     fire2 (16; 64, 64), fire3 (16; 64, 64), pool3
///     fire4 (32; 128, 128), fire5 (32; 128, 128), pool5
///     fire6 (48; 192, 192), fire7 (48; 192, 192), fire8 (64; 256, 256), fire9 (64; 256, 256)
///     conv10 1x1 1000 + ReLU, pool10 (global average), flatten, fullyconnected0 (1000 -> N), softmax
///
/// A fire module is squeeze 1x1 + ReLU, then expand 1x1 + ReLU and expand 3x3 (same padding) + ReLU,
/// concatenated along channels. The max pools use Core ML's includeLastPixel padding, which is
/// PyTorch's ceil_mode: at 227x227 the planes go 113 -> 56 -> 28 -> 14, so conv10 sees 14x14x512
/// (at torchvision's usual 224x224 it is 13x13x512).
public enum SqueezeNet {
    /// What `SqueezeNet.build(_:)` makes: the classes, which layers train, the seed and the input size.
    public struct Options: Sendable {
        /// Class labels, in output order.
        public var labels: [String]
        /// Layers made updatable (convolution or inner product).
        public var updatableLayers: [String] = ["conv10", "fullyconnected0"]
        /// Seed of the Kaiming-uniform initial weights, and the model's shuffle seed.
        public var seed: UInt64 = 0
        /// Input image side (SqueezeNet's 227 by default).
        public var inputSize: Int = 227
        /// A SqueezeNet of the same input size whose weights the frozen (not updatable) layers take,
        /// instead of fresh ones: transfer learning from an earlier training. The updatable layers
        /// start fresh from `seed`.
        public var frozenWeightsFrom: CoreMLModel? = nil

        /// Options with explicit labels (at least 2, distinct; checked by `build`).
        public init(labels: [String], updatableLayers: [String] = ["conv10", "fullyconnected0"], seed: UInt64 = 0,
                    inputSize: Int = 227) {
            self.labels = labels; self.updatableLayers = updatableLayers; self.seed = seed; self.inputSize = inputSize
        }

        /// Labels "0" ... "N-1".
        public init(classes: Int, updatableLayers: [String] = ["conv10", "fullyconnected0"], seed: UInt64 = 0) {
            self.init(labels: (0..<max(0, classes)).map(String.init), updatableLayers: updatableLayers, seed: seed)
        }
    }

    /// torchvision squeezenet1_1's fire modules: (name, squeeze, expand1x1, expand3x3), and where the pools go.
    static let fires: [(name: String, squeeze: Int, expand: Int)] = [
        ("fire2", 16, 64), ("fire3", 16, 64), ("fire4", 32, 128), ("fire5", 32, 128),
        ("fire6", 48, 192), ("fire7", 48, 192), ("fire8", 64, 256), ("fire9", 64, 256),
    ]
    static let poolAfter: [String: String] = ["fire3": "pool3", "fire5": "pool5"]

    /// The image input's feature name: "image".
    public static let inputName = "image"
    /// The class-probabilities output (a dictionary label -> probability): "labelProbability".
    public static let probabilitiesName = "labelProbability"
    /// The predicted-label output: "label".
    public static let labelName = "label"

    /// Builds the updatable SqueezeNet classifier.
    /// - Throws: `UpdraftError` `.invalidArgument` for fewer than 2 or duplicate labels, an input size outside 35...4096, an updatable layer that is not a SqueezeNet convolution or inner product, or a `frozenWeightsFrom` model whose layers do not match.
    public static func build(_ options: Options) throws -> CoreMLModel {
        guard options.labels.count >= 2 else {
            throw UpdraftError(.invalidArgument, "SqueezeNet needs at least 2 classes, got \(options.labels.count)")
        }
        guard Set(options.labels).count == options.labels.count else {
            throw UpdraftError(.invalidArgument, "class labels must be distinct")
        }
        guard options.inputSize >= 35, options.inputSize <= 4096 else {
            throw UpdraftError(.invalidArgument, "input size \(options.inputSize) is outside 35...4096")
        }
        let image = ImageFeatureType(width: options.inputSize, height: options.inputSize, colorSpace: .rgb)
        var b = try ModelBuilder(input: FeatureDescription(name: inputName, type: .image(image),
                                                           shortDescription: "Input image, RGB"),
                                 seed: options.seed)
        b.setImageScaler(ImageScaler(channelScale: 1.0 / 255.0))
        let ceil3x3 = PoolingPadding.includeLastPixel(height: 0, width: 0)

        try b.convolution("conv1", outputChannels: 64, kernel: (3, 3), stride: (2, 2))
        try b.activation("relu_conv1", .relu)
        try b.pooling("pool1", .max, kernel: (3, 3), stride: (2, 2), padding: ceil3x3)
        for fire in fires {
            try b.fireModule(fire.name, squeeze: fire.squeeze, expand1x1: fire.expand, expand3x3: fire.expand)
            if let pool = poolAfter[fire.name] {
                try b.pooling(pool, .max, kernel: (3, 3), stride: (2, 2), padding: ceil3x3)
            }
        }
        try b.convolution("conv10", outputChannels: 1000, kernel: (1, 1))
        try b.activation("relu_conv10", .relu)
        try b.globalPoolClassifierHead(pool: "pool10", dense: "fullyconnected0", labels: .strings(options.labels),
                                       probabilities: probabilitiesName, predictedFeatureName: labelName)
        try b.makeUpdatable(options.updatableLayers)
        try b.setCrossEntropyLoss(name: "lossLayer", input: probabilitiesName)
        b.setOptimizer(.sgd(learningRate: 0.001, learningRateRange: DoubleBounds(min: 1e-6, max: 1),
                            miniBatchSize: 8, allowedMiniBatchSizes: [1, 2, 8, 16, 32, 64],
                            momentum: 0, momentumRange: DoubleBounds(min: 0, max: 1)))
        b.setEpochs(10, allowed: [1, 10, 50])
        b.setShuffle(true, seed: Int64(truncatingIfNeeded: options.seed & 0x7FFF_FFFF_FFFF_FFFF))
        b.setMetadata(ModelMetadata(
            shortDescription: "SqueezeNet 1.1, \(options.labels.count) classes, updatable (\(options.updatableLayers.joined(separator: ", ")))",
            author: "updraft create squeezenet",
            userDefined: [.init(key: "updraft.seed", value: String(options.seed))]))
        var model = try b.build()
        if let source = options.frozenWeightsFrom {
            try model.copyWeights(from: source, layers: model.frozenWeightedLayerNames)
        }
        return model
    }
}
