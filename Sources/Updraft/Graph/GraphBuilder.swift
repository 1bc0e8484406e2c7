/// Building a `NetworkGraph` from a model: connect layers by blob names, order them, infer shapes.

extension NetworkGraph {
    /// Builds the graph of a model's network. Throws `UpdraftError` naming the layer (and its
    /// type, or the shapes involved) for anything Updraft cannot run: unknown layer types,
    /// unsupported options, missing or mismatched weights, blobs nobody produces, cycles.
    public init(model: CoreMLModel) throws {
        let spec = model.spec
        let network = spec.network
        kind = network.kind
        classLabels = network.classLabels
        predictedFeatureName = spec.description.predictedFeatureName
        predictedProbabilitiesName = spec.description.predictedProbabilitiesName
        updateParameters = network.updateParameters

        input = try NetworkGraph.resolveInput(model)

        // Producers: each blob comes from exactly one place.
        var producer: [String: Int] = [:]
        var seenNames: Set<String> = []
        for (i, layer) in network.layers.enumerated() {
            guard seenNames.insert(layer.name).inserted else {
                throw UpdraftError(.invalidModel, "two layers are named '\(layer.name)'",
                                   hint: "layer names must be unique")
            }
            guard layer.outputs.count == 1 else {
                throw UpdraftError(.unsupported,
                    "layer '\(layer.name)' (\(layer.typeName)) has \(layer.outputs.count) outputs; Updraft runs layers with exactly one")
            }
            let out = layer.outputs[0]
            if out == input.name {
                throw UpdraftError(.invalidModel, "layer '\(layer.name)' writes the network input '\(out)'")
            }
            if let other = producer[out] {
                throw UpdraftError(.unsupported,
                    "blob '\(out)' is produced by both layer '\(network.layers[other].name)' and layer '\(layer.name)'",
                    hint: "Updraft needs every blob produced once (no in-place layers)")
            }
            producer[out] = i
        }
        for layer in network.layers {
            guard !layer.inputs.isEmpty || layer.params.readsNoInput else {
                throw UpdraftError(.invalidModel, "layer '\(layer.name)' (\(layer.typeName)) has no input")
            }
            for blob in layer.inputs where blob != input.name && producer[blob] == nil {
                throw UpdraftError(.invalidModel,
                    "layer '\(layer.name)' reads blob '\(blob)', which is neither the input '\(input.name)' nor any layer's output")
            }
        }

        let order = try NetworkGraph.topologicalOrder(network.layers, producer: producer)

        var shapes: [String: Shape] = [input.name: input.shape]
        var logicalShapes: [String: LogicalShape] = [input.name: input.logicalShape]
        var layers: [GraphLayer] = []
        layers.reserveCapacity(order.count)
        for i in order {
            let layer = network.layers[i]
            let inputShapes = layer.inputs.map { shapes[$0]! }  // every input was checked above and precedes i
            let g = try ShapeInference.layer(layer, index: i, inputShapes: inputShapes,
                                             inputLogicalShapes: layer.inputs.map { logicalShapes[$0]! })
            shapes[g.output] = g.outputShape
            logicalShapes[g.output] = g.outputLogicalShape
            layers.append(g)
        }
        self.layers = layers
        lookup = GraphLookup(layers)  // didSet does not run in an initializer
        blobShapes = shapes
        blobLogicalShapes = logicalShapes

        loss = nil
        lossProblem = nil
        if let lossSpec = network.updateParameters?.lossLayers.first {
            do {
                loss = try NetworkGraph.resolveLoss(lossSpec, model: model, layers: layers, shapes: shapes)
            } catch let e as UpdraftError {
                lossProblem = e
            }
        }
    }

    // MARK: Input

    static func resolveInput(_ model: CoreMLModel) throws -> GraphInput {
        let inputs = model.spec.description.inputs
        guard let feature = inputs.first else {
            throw UpdraftError(.invalidModel, "the model describes no input feature")
        }
        guard inputs.count == 1 else {
            throw UpdraftError(.unsupported,
                "the model has \(inputs.count) inputs (\(inputs.map(\.name).joined(separator: ", "))); Updraft trains single-input networks")
        }
        let what = "input '\(feature.name)'"
        let shape: Shape
        let logical: LogicalShape
        var preprocessing: InputPreprocessing? = nil
        let pre = model.spec.network.preprocessing.first { $0.featureName == feature.name || $0.featureName.isEmpty }
        if pre?.hasMeanImage == true {
            throw UpdraftError(.unsupported, "\(what) uses mean-image preprocessing, which Updraft does not apply",
                               hint: "use an image scaler (channelScale and per-channel biases) instead")
        }
        switch feature.type {
        case let .image(image):
            guard let channels = image.colorSpace.channels else {
                throw UpdraftError(.unsupported, "\(what) has \(image.colorSpace)")
            }
            shape = try LayerShapes.checkedShape([1, channels, image.height, image.width], "\(what) (image)")
            logical = LogicalShape(canonical: shape)
            if let s = pre?.scaler {
                preprocessing = InputPreprocessing(scale: s.channelScale, bias: s.biases(for: image.colorSpace))
            }
        case let .multiArray(array):
            logical = try LogicalShape.input(multiArray: array.shape, what)
            _ = try LayerShapes.checkedShape(array.shape, "\(what) (multi-array)")
            shape = try LayerShapes.checkedShape(logical.canonical.dims, "\(what) (multi-array)")
        default:
            throw UpdraftError(.unsupported, "\(what) is \(feature.type); Updraft trains on image and multi-array inputs")
        }
        return GraphInput(name: feature.name, feature: feature, shape: shape, logicalShape: logical, preprocessing: preprocessing)
    }

    // MARK: Order

    /// Kahn's algorithm, always taking the ready layer that comes first in the file, so a file
    /// already in order keeps it. A cycle is an error naming the layers on it.
    static func topologicalOrder(_ layers: [LayerSpec], producer: [String: Int]) throws -> [Int] {
        var pending = [Int](repeating: 0, count: layers.count)
        var consumers = [[Int]](repeating: [], count: layers.count)
        for (i, layer) in layers.enumerated() {
            for blob in layer.inputs {
                if let p = producer[blob] {
                    pending[i] += 1
                    consumers[p].append(i)
                }
            }
        }
        var ready = MinHeap()
        for i in layers.indices where pending[i] == 0 { ready.push(i) }
        var order: [Int] = []
        order.reserveCapacity(layers.count)
        while let i = ready.pop() {
            order.append(i)
            for c in consumers[i] {
                pending[c] -= 1
                if pending[c] == 0 { ready.push(c) }
            }
        }
        guard order.count == layers.count else {
            let stuck = layers.indices.filter { pending[$0] > 0 }.map { "'\(layers[$0].name)'" }
            throw UpdraftError(.invalidModel,
                "layers \(stuck.prefix(10).joined(separator: ", ")) feed each other in a cycle",
                hint: "a neural network must be acyclic")
        }
        return order
    }

    // MARK: Loss

    static func resolveLoss(_ spec: LossLayerSpec, model: CoreMLModel, layers: [GraphLayer],
                            shapes: [String: Shape]) throws -> GraphLoss {
        guard let kind = spec.kind else {
            throw UpdraftError(.unsupported,
                "loss layer '\(spec.name)' has a loss type Updraft does not know (LossLayer field \(spec.unknownTypeField ?? 0))",
                hint: "Updraft trains with categorical cross-entropy or mean squared error")
        }
        guard let inputShape = shapes[spec.input] else {
            throw UpdraftError(.invalidModel,
                "loss layer '\(spec.name)' reads blob '\(spec.input)', which no layer produces")
        }
        guard let target = model.lossTargetFeature else {
            throw UpdraftError(.invalidModel,
                "loss layer '\(spec.name)': its target '\(spec.target)' is not among the training inputs (\(model.modelDescription.trainingInputs.map(\.name).joined(separator: ", ")))",
                hint: "add the target to the model's training inputs")
        }
        var softmaxLayer: String? = nil, logits: String? = nil
        let encoding: LossTargetEncoding
        switch kind {
        case .categoricalCrossEntropy:
            if let p = layers.first(where: { $0.output == spec.input }), case .softmax = p.op {
                softmaxLayer = p.name
                logits = p.inputs[0]
            }
            let classes = inputShape.itemCount
            switch target.type {
            case .string, .int64:
                if let labels = model.classLabels {
                    if case .string = target.type, case .int64 = labels {
                        throw UpdraftError(.invalidModel, "target '\(target.name)' is a String but the class labels are Int64")
                    }
                    if case .int64 = target.type, case .strings = labels {
                        throw UpdraftError(.invalidModel, "target '\(target.name)' is an Int64 but the class labels are Strings")
                    }
                    guard labels.count == classes else {
                        throw UpdraftError(.invalidModel,
                            "the model has \(labels.count) class labels but loss input '\(spec.input)' has \(classes) classes (shape \(inputShape))")
                    }
                    encoding = .classLabel(labels)
                } else if case .int64 = target.type {
                    encoding = .classIndex
                } else {
                    throw UpdraftError(.invalidModel,
                        "target '\(target.name)' is a String label but the model has no class labels to map it to")
                }
            case let .multiArray(a) where a.shape.reduce(1, { $0 &* max($1, 0) }) == 1 || a.shape.isEmpty:
                encoding = .classIndex
            case .double:
                encoding = .classIndex
            default:
                throw UpdraftError(.invalidModel,
                    "cross-entropy target '\(target.name)' is \(target.type); expected a class label or a one-element class index")
            }
        case .meanSquaredError:
            switch target.type {
            case let .multiArray(a):
                let count = a.shape.reduce(1) { $0.multipliedReportingOverflow(by: max($1, 0)).partialValue }
                guard count == inputShape.itemCount else {
                    throw UpdraftError(.invalidModel,
                        "mean-squared-error target '\(target.name)' has shape \(a.shape) but loss input '\(spec.input)' has \(inputShape.itemCount) values (shape \(inputShape))")
                }
            case .double where inputShape.itemCount == 1:
                break
            default:
                throw UpdraftError(.invalidModel,
                    "mean-squared-error target '\(target.name)' is \(target.type); expected a multi-array of \(inputShape.itemCount) values")
            }
            encoding = .values(inputShape)
        }
        return GraphLoss(name: spec.name, kind: kind, input: spec.input, inputShape: inputShape,
                         softmaxLayer: softmaxLayer, logits: logits, targetFeature: target, targetEncoding: encoding)
    }
}

/// A binary min-heap of layer indices.
struct MinHeap {
    private var items: [Int] = []
    mutating func push(_ v: Int) {
        items.append(v)
        var i = items.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard items[parent] > items[i] else { break }
            items.swapAt(parent, i)
            i = parent
        }
    }
    mutating func pop() -> Int? {
        guard let first = items.first else { return nil }
        let last = items.removeLast()
        if !items.isEmpty {
            items[0] = last
            var i = 0
            while true {
                let l = 2 * i + 1, r = l + 1
                var m = i
                if l < items.count, items[l] < items[m] { m = l }
                if r < items.count, items[r] < items[m] { m = r }
                if m == i { break }
                items.swapAt(i, m)
                i = m
            }
        }
        return first
    }
}
