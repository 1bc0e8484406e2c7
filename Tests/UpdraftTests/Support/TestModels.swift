@testable import UpdraftModel

extension ModelBuilder {
    /// The head the layer-family tests end their models with: an inner product "fc" to 3 classes, a
    /// softmax and a classifier of labels a, b, c whose layers "conv" and "fc" are trained with
    /// cross-entropy and SGD (learning rate 0.5, momentum 0.5, batch 3, 3 epochs).
    mutating func buildLayerTestClassifier() throws -> CoreMLModel {
        try innerProduct("fc", outputChannels: 3)
        try softmax("softmax", output: "probabilities")
        try makeClassifier(labels: .strings(["a", "b", "c"]), probabilities: "probabilities")
        try makeUpdatable(["conv", "fc"])
        try setCrossEntropyLoss(input: "probabilities")
        setOptimizer(.sgd(learningRate: 0.5, miniBatchSize: 3, momentum: 0.5))
        setEpochs(3)
        return try build()
    }
}

extension ModelBuilder {
    /// x [3] -> inner product "fc" [2], an updatable regressor with mean squared error on "fc"; the
    /// optimizer and epochs are the caller's.
    static func denseRegressor() throws -> ModelBuilder {
        var r = try ModelBuilder(input: FeatureDescription(name: "x", type: .multiArray(ArrayFeatureType(shape: [3], dataType: .float32))))
        try r.innerProduct("fc", outputChannels: 2)
        try r.addOutput("fc")
        r.makeRegressor()
        try r.makeUpdatable(["fc"])
        try r.setMeanSquaredErrorLoss(input: "fc")
        return r
    }
}

extension FeatureDescription {
    /// A float32 multi-array input "x" of `shape` (the layout tests' models).
    static func floatArray(_ shape: [Int]) -> FeatureDescription {
        FeatureDescription(name: "x", type: .multiArray(ArrayFeatureType(shape: shape, dataType: .float32)))
    }
}
