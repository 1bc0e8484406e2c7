import UpdraftCore

/// Building a `NetworkGraph` from a model: connect layers by blob names, order them, infer shapes.
extension NetworkGraph {
    /// Builds the graph of a model's network. Throws one `UpdraftError` listing everything Updraft
    /// cannot run (see `GraphProblems`): unknown layer types grouped by type, unsupported options,
    /// missing or mismatched weights, blobs nobody produces, cycles; a single problem is thrown as
    /// the layer reported it.
    public init(model: CoreMLModel) throws {
        guard model.spec.neuralNetwork != nil else {
            throw UpdraftError(.unsupported, "this model is a \(model.spec.modelType.name), not a neural network: it has no layers to run",
                               hint: "run it through its model kind (UpdateTask, ModelKinds.predictor, `updraft inspect`)")
        }
        var problems = GraphProblems()
        self.init(model: model, problems: &problems)
        if !problems.isEmpty { throw problems.error }
    }

    /// The graph as far as it can be built, and every problem met on the way (`updraft inspect`).
    /// With problems, `layers` holds only the layers whose shapes could be inferred.
    public static func checked(_ model: CoreMLModel) -> (graph: NetworkGraph, problems: GraphProblems) {
        var problems = GraphProblems()
        let graph = NetworkGraph(model: model, problems: &problems)
        return (graph, problems)
    }

    /// Goes on past every problem: a layer that fails leaves its output unknown, and the layers that
    /// read an unknown blob are only asked whether Updraft supports them at all.
    init(model: CoreMLModel, problems: inout GraphProblems) {
        let spec = model.spec
        let network = spec.network
        kind = network.kind
        classLabels = network.classLabels
        predictedFeatureName = spec.description.predictedFeatureName
        predictedProbabilitiesName = spec.description.predictedProbabilitiesName
        updateParameters = network.updateParameters

        var inputKnown = true
        do {
            input = try NetworkGraph.resolveInput(model)
        } catch {
            problems.add(error)
            inputKnown = false
            let feature = spec.description.inputs.first ?? FeatureDescription(name: "", type: .double)
            input = GraphInput(name: feature.name, feature: feature, shape: Shape([1, 1, 1, 1]),
                               logicalShape: LogicalShape(canonical: Shape([1, 1, 1, 1])), preprocessing: nil)
        }

        // Producers: each blob comes from exactly one place. `failed`: layers that cannot be built
        // whatever their inputs' shapes.
        var producer: [String: Int] = [:]
        var failed: Set<Int> = []
        var seenNames: Set<String> = []
        for (i, layer) in network.layers.enumerated() {
            if !seenNames.insert(layer.name).inserted {
                problems.add(UpdraftError(.invalidModel, "two layers are named '\(layer.name)'", hint: "layer names must be unique"))
            }
            if layer.outputs.count != 1 {
                problems.add(UpdraftError(.unsupported,
                    "layer '\(layer.name)' (\(layer.typeName)) has \(layer.outputs.count) outputs; Updraft runs layers with exactly one"))
                failed.insert(i)
            }
            for out in layer.outputs {
                if out == input.name {
                    problems.add(UpdraftError(.invalidModel, "layer '\(layer.name)' writes the network input '\(out)'"))
                    failed.insert(i)
                } else if let other = producer[out] {
                    problems.add(UpdraftError(.unsupported,
                        "blob '\(out)' is produced by both layer '\(network.layers[other].name)' and layer '\(layer.name)'",
                        hint: "Updraft needs every blob produced once (no in-place layers)"))
                    failed.insert(i)
                } else {
                    producer[out] = i
                }
            }
        }
        for (i, layer) in network.layers.enumerated() {
            if layer.inputs.isEmpty && !layer.params.readsNoInput {
                problems.add(UpdraftError(.invalidModel, "layer '\(layer.name)' (\(layer.typeName)) has no input"))
                failed.insert(i)
            }
            for blob in layer.inputs where blob != input.name && producer[blob] == nil {
                problems.add(UpdraftError(.invalidModel,
                    "layer '\(layer.name)' reads blob '\(blob)', which is neither the input '\(input.name)' nor any layer's output"))
                failed.insert(i)
            }
        }

        let (order, stuck) = NetworkGraph.partialOrder(network.layers, producer: producer)
        if !stuck.isEmpty { problems.add(NetworkGraph.cycleError(network.layers, stuck)) }

        var shapes: [String: Shape] = inputKnown ? [input.name: input.shape] : [:]
        var logicalShapes: [String: LogicalShape] = inputKnown ? [input.name: input.logicalShape] : [:]
        // Why a blob's shape is unknown: the failed layer (or input) it traces back to.
        var cause: [String: String] = inputKnown ? [:] : [input.name: "input '\(input.name)'"]
        var layers: [GraphLayer] = []
        layers.reserveCapacity(order.count)
        for i in order {
            let layer = network.layers[i]
            if failed.contains(i) {
                for o in layer.outputs where cause[o] == nil { cause[o] = layer.name }
                continue
            }
            if let unknown = layer.inputs.first(where: { shapes[$0] == nil }) {
                // Its shapes cannot be known; whether Updraft can run it at all still can.
                if let e = NetworkGraph.unsupportedWhateverTheShapes(layer, index: i) {
                    problems.add(e, layer: layer)
                    for o in layer.outputs { cause[o] = layer.name }
                } else {
                    let root = cause[unknown] ?? unknown
                    problems.addUnchecked(layer.name, cause: root)
                    for o in layer.outputs { cause[o] = root }
                }
                continue
            }
            let inputShapes = layer.inputs.map { shapes[$0]! }  // every input is known (checked above)
            do {
                let g = try ShapeInference.layer(layer, index: i, inputShapes: inputShapes,
                                                 inputLogicalShapes: layer.inputs.map { logicalShapes[$0]! })
                shapes[g.output] = g.outputShape
                logicalShapes[g.output] = g.outputLogicalShape
                layers.append(g)
            } catch {
                problems.add(error, layer: layer)
                for o in layer.outputs { cause[o] = layer.name }
            }
        }
        self.layers = layers
        lookup = GraphLookup(layers)  // didSet does not run in an initializer
        blobShapes = shapes
        blobLogicalShapes = logicalShapes

        loss = nil
        lossProblem = nil
        // A loss on a blob that a failed layer should have made is not checked (the problems say why).
        if let lossSpec = network.updateParameters?.lossLayers.first, problems.isEmpty || shapes[lossSpec.input] != nil {
            do {
                loss = try NetworkGraph.resolveLoss(lossSpec, model: model, layers: layers, shapes: shapes)
            } catch let e as UpdraftError {
                lossProblem = e
            } catch {
                lossProblem = UpdraftError(.invalidModel, "\(error)")
            }
        }
    }

    /// The problem a layer has whatever its inputs' shapes: an unsupported type or option, found by
    /// asking `ShapeInference` with placeholder 1x1x1 inputs and keeping only an `.unsupported` answer.
    static func unsupportedWhateverTheShapes(_ layer: LayerSpec, index: Int) -> UpdraftError? {
        do {
            _ = try ShapeInference.layer(layer, index: index, inputShapes: layer.inputs.map { _ in Shape([1, 1, 1, 1]) })
            return nil
        } catch let e as UpdraftError where e.kind == .unsupported {
            return e
        } catch {
            return nil
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
    package static func topologicalOrder(_ layers: [LayerSpec], producer: [String: Int]) throws -> [Int] {
        let (order, stuck) = partialOrder(layers, producer: producer)
        guard stuck.isEmpty else { throw cycleError(layers, stuck) }
        return order
    }

    /// The layers that can be ordered, and those left waiting on a cycle.
    static func partialOrder(_ layers: [LayerSpec], producer: [String: Int]) -> (order: [Int], stuck: [Int]) {
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
        return (order, order.count == layers.count ? [] : layers.indices.filter { pending[$0] > 0 })
    }

    static func cycleError(_ layers: [LayerSpec], _ stuck: [Int]) -> UpdraftError {
        UpdraftError(.invalidModel,
            "layers \(stuck.prefix(10).map { "'\(layers[$0].name)'" }.joined(separator: ", ")) feed each other in a cycle",
            hint: "a neural network must be acyclic")
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
