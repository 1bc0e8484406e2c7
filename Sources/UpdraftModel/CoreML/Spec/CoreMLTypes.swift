/// The oneof cases of coremltools' protos that name a kind of thing: NeuralNetworkLayer's layer types,
/// ActivationParams' activations and Model's model types. Each case's raw value is its field number and
/// its name is the proto's field name: this file is the only place a layer, activation or model type's
/// number or name is written. `LayerTable.swift` says which layer types Updraft reads as typed
/// parameters; the rest load, inspect and write back unchanged as `.unsupported`.

/// NeuralNetworkLayer's layer-type oneof (NeuralNetwork.proto, coremltools 9), by field number.
public enum NeuralNetworkLayerType: Int, CaseIterable, Hashable, Sendable {
    case convolution = 100, pooling = 120, activation = 130, innerProduct = 140, embedding = 150, batchnorm = 160
    case mvn = 165, l2normalize = 170, softmax = 175, lrn = 180, crop = 190, padding = 200, upsample = 210
    case resizeBilinear = 211, cropResize = 212, unary = 220, add = 230, multiply = 231, average = 240, scale = 245
    case bias = 250, max = 260, min = 261, dot = 270, reduce = 280, loadConstant = 290, reshape = 300, flatten = 301
    case permute = 310, concat = 320, split = 330, sequenceRepeat = 340, reorganizeData = 345, slice = 350
    case simpleRecurrent = 400, gru = 410, uniDirectionalLSTM = 420, biDirectionalLSTM = 430, custom = 500, copy = 600
    case branch = 605, loop = 615, loopBreak = 620, loopContinue = 625, rangeStatic = 635, rangeDynamic = 640
    case clip = 660, ceil = 665, floor = 670, sign = 680, round = 685, exp2 = 700, sin = 710, cos = 715, tan = 720
    case asin = 730, acos = 735, atan = 740, sinh = 750, cosh = 755, tanh = 760, asinh = 770, acosh = 775, atanh = 780
    case erf = 790, gelu = 795, equal = 815, notEqual = 820, lessThan = 825, lessEqual = 827, greaterThan = 830
    case greaterEqual = 832, logicalOr = 840, logicalXor = 845, logicalNot = 850, logicalAnd = 855
    case modBroadcastable = 865, minBroadcastable = 870, maxBroadcastable = 875, addBroadcastable = 880
    case powBroadcastable = 885, divideBroadcastable = 890, floorDivBroadcastable = 895, multiplyBroadcastable = 900
    case subtractBroadcastable = 905, tile = 920, stack = 925, gather = 930, scatter = 935, gatherND = 940
    case scatterND = 945, softmaxND = 950, gatherAlongAxis = 952, scatterAlongAxis = 954, reverse = 960
    case reverseSeq = 965, splitND = 975, concatND = 980, transpose = 985, sliceStatic = 995, sliceDynamic = 1000
    case slidingWindows = 1005, topK = 1015, argMin = 1020, argMax = 1025, embeddingND = 1040, batchedMatmul = 1045
    case getShape = 1065, loadConstantND = 1070, fillLike = 1080, fillStatic = 1085, fillDynamic = 1090
    case broadcastToLike = 1100, broadcastToStatic = 1105, broadcastToDynamic = 1110, squeeze = 1120, expandDims = 1125
    case flattenTo2D = 1130, reshapeLike = 1135, reshapeStatic = 1140, reshapeDynamic = 1145
    case rankPreservingReshape = 1150, constantPad = 1155, randomNormalLike = 1170, randomNormalStatic = 1175
    case randomNormalDynamic = 1180, randomUniformLike = 1190, randomUniformStatic = 1195, randomUniformDynamic = 1200
    case randomBernoulliLike = 1210, randomBernoulliStatic = 1215, randomBernoulliDynamic = 1220
    case categoricalDistribution = 1230, reduceL1 = 1250, reduceL2 = 1255, reduceMax = 1260, reduceMin = 1265
    case reduceSum = 1270, reduceProd = 1275, reduceMean = 1280, reduceLogSum = 1285, reduceSumSquare = 1290
    case reduceLogSumExp = 1295, whereNonZero = 1313, matrixBandPart = 1315, lowerTriangular = 1320
    case upperTriangular = 1325, whereBroadcastable = 1330, layerNormalization = 1350, NonMaximumSuppression = 1400
    case oneHot = 1450, cumSum = 1455, clampedReLU = 1460, argSort = 1461, pooling3d = 1465, globalPooling3d = 1466
    case sliceBySize = 1470, convolution3d = 1471

    /// The proto's field name (e.g. `innerProduct`, `addBroadcastable`).
    public var name: String { String(describing: self) }

    /// The type's name for a field number ("layer type N" for one the proto does not define).
    public static func name(ofField field: Int) -> String {
        NeuralNetworkLayerType(rawValue: field)?.name ?? "layer type \(field)"
    }
}

/// ActivationParams' nonlinearity oneof (NeuralNetwork.proto), by field number.
public enum ActivationParamsType: Int, CaseIterable, Hashable, Sendable {
    case linear = 5, ReLU = 10, leakyReLU = 15, thresholdedReLU = 20, PReLU = 25, tanh = 30, scaledTanh = 31
    case sigmoid = 40, sigmoidHard = 41, ELU = 50, softsign = 60, softplus = 70, parametricSoftplus = 71

    /// The proto's field name (e.g. `ReLU`, `leakyReLU`).
    public var name: String { String(describing: self) }
}

/// Model's model-type oneof (Model.proto, all numbered 200 and up), by field number.
public enum CoreMLModelType: Int, CaseIterable, Hashable, Sendable {
    case pipelineClassifier = 200, pipelineRegressor = 201, pipeline = 202, glmRegressor = 300
    case supportVectorRegressor = 301, treeEnsembleRegressor = 302, neuralNetworkRegressor = 303
    case bayesianProbitRegressor = 304, glmClassifier = 400, supportVectorClassifier = 401
    case treeEnsembleClassifier = 402, neuralNetworkClassifier = 403, kNearestNeighborsClassifier = 404
    case neuralNetwork = 500, itemSimilarityRecommender = 501, mlProgram = 502, customModel = 555, linkedModel = 556
    case classConfidenceThresholding = 560, oneHotEncoder = 600, imputer = 601, featureVectorizer = 602
    case dictVectorizer = 603, scaler = 604, categoricalMapping = 606, normalizer = 607, arrayFeatureExtractor = 609
    case nonMaximumSuppression = 610, identity = 900, textClassifier = 2000, wordTagger = 2001
    case visionFeaturePrint = 2002, soundAnalysisPreprocessing = 2003, gazetteer = 2004, wordEmbedding = 2005
    case audioFeaturePrint = 2006, serializedModel = 3000

    /// The proto's field name (e.g. `neuralNetworkClassifier`, `pipeline`).
    public var name: String { String(describing: self) }

    /// The type's name for a field number ("model type N" for one the proto does not define).
    public static func name(ofField field: Int) -> String {
        CoreMLModelType(rawValue: field)?.name ?? "model type \(field)"
    }
}
