import UpdraftCore

/// Transfer learning between models: the layers one fine-tuning keeps frozen take the weights an
/// earlier training learned (a whole network trained on one task, a fresh head fine-tuned on another).
extension CoreMLModel {
    /// Convolution and inner-product layers (the layers with weights), in file order.
    public var weightedLayerNames: [String] { layers.filter { $0.weightParams != nil }.map(\.name) }

    /// Weighted layers the model does not train.
    public var frozenWeightedLayerNames: [String] { layers.filter { $0.weightParams != nil && !$0.isUpdatable }.map(\.name) }

    /// Copies the weights and biases of `names` from `source`, which must have layers of the same
    /// names with the same weight shapes (and a bias exactly where this model has one). Nothing is
    /// changed unless every layer can be copied.
    public mutating func copyWeights(from source: CoreMLModel, layers names: [String]) throws {
        var copy = self
        for name in names {
            guard layer(named: name) != nil else {
                throw UpdraftError(.invalidArgument, "this model has no layer '\(name)' to copy weights into",
                                   hint: "its weighted layers are: \(weightedLayerNames.joined(separator: ", "))")
            }
            guard source.layer(named: name) != nil else {
                throw UpdraftError(.invalidArgument, "the model to copy weights from has no layer '\(name)'",
                                   hint: "copy from a model with the same architecture (its weighted layers are: \(source.weightedLayerNames.joined(separator: ", ")))")
            }
            let from = try source.weightShape(ofLayer: name), to = try weightShape(ofLayer: name)
            guard from == to else {
                throw UpdraftError(.invalidArgument,
                    "layer '\(name)' has weights of shape \(to) here and \(from) in the model to copy from",
                    hint: "copy only the layers both models share; a head sized for other classes must start fresh")
            }
            try copy.setWeights(try source.weights(ofLayer: name), ofLayer: name)
            let bias = try source.bias(ofLayer: name), hasBias = try self.bias(ofLayer: name) != nil
            guard (bias != nil) == hasBias else {
                throw UpdraftError(.invalidArgument,
                    "layer '\(name)' \(hasBias ? "has" : "has no") bias here but \(bias == nil ? "none" : "one") in the model to copy from")
            }
            if let bias { try copy.setBias(bias, ofLayer: name) }
        }
        self = copy
    }
}
