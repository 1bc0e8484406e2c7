import UpdraftModel

/// The workload `updraft devices` plans for to show what each compute-units setting would pick:
/// fine-tuning SqueezeNet 1.1 (227x227 RGB, 1000 classes, conv10 and fullyconnected0 updatable).
public struct TypicalWorkload {
    /// One line naming the model, its updatable layers and the batch size, as `updraft devices` prints it.
    public var description: String
    /// The workload's network, as the scheduler plans it.
    public var graph: NetworkGraph
    /// Examples per mini-batch the plan is made for.
    public var batchSize: Int

    /// Fine-tuning SqueezeNet 1.1 with batches of `batchSize` (default 64). Throws if the built model cannot be analysed (not expected).
    public static func squeezeNet(batchSize: Int = 64) throws -> TypicalWorkload {
        let model = try SqueezeNet.build(.init(classes: 1000))
        return TypicalWorkload(
            description: "SqueezeNet 1.1 (227x227, 1000 classes, conv10 and fullyconnected0 updatable), batch \(batchSize)",
            graph: try NetworkGraph(model: model), batchSize: batchSize)
    }
}
