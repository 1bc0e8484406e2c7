/// Long models for scale checks: the benchmarks time them and the tests make sure every pass over a
/// model (reading, validation, graph building, planning, training) stays linear in its length.
public enum ChainModel {
    /// An updatable classifier: input `[width]` -> inner product `dense_in` (updatable) -> `reLUs`
    /// ReLU layers one after another -> inner product `dense_out` (updatable) -> softmax over
    /// `classes` labels "0", "1", ...; SGD, mini-batch `batch`, one epoch.
    public static func make(reLUs: Int, width: Int = 8, classes: Int = 3, batch: Int64 = 4, seed: UInt64 = 1) throws -> CoreMLModel {
        let input = FeatureDescription(name: "x", type: .multiArray(.init(shape: [width], dataType: .double)))
        var b = try ModelBuilder(input: input, seed: seed)
        try b.innerProduct("dense_in", outputChannels: width)
        for i in 0..<reLUs { try b.activation("relu\(i)", .relu) }
        try b.innerProduct("dense_out", outputChannels: classes)
        try b.softmax("probabilities")
        try b.makeClassifier(labels: .strings((0..<classes).map(String.init)), probabilities: b.lastOutput)
        try b.makeUpdatable(["dense_in", "dense_out"])
        try b.setCrossEntropyLoss(input: b.lastOutput)
        b.setOptimizer(.sgd(learningRate: 0.01, miniBatchSize: batch))
        b.setEpochs(1)
        return try b.build()
    }
}
