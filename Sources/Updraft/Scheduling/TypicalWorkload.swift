/// The workload `updraft devices` plans for to show what each compute-units setting would pick:
/// fine-tuning SqueezeNet 1.1 (227x227 RGB, 1000 classes, conv10 and fullyconnected0 updatable).
public struct TypicalWorkload {
    public var description: String
    public var graph: NetworkGraph
    public var batchSize: Int

    public static func squeezeNet(batchSize: Int = 64) throws -> TypicalWorkload {
        let model = try SqueezeNet.build(.init(classes: 1000))
        return TypicalWorkload(
            description: "SqueezeNet 1.1 (227x227, 1000 classes, conv10 and fullyconnected0 updatable), batch \(batchSize)",
            graph: try NetworkGraph(model: model), batchSize: batchSize)
    }
}
