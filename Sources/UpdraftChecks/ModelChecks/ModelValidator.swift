import UpdraftCore
import UpdraftModel
import UpdraftPlacement

/// Checks a model against Core ML's rules for updatable models, and against what Updraft can run.
///
/// Errors: things Core ML would refuse and Updraft cannot (or should not) train either.
/// Warnings: things Core ML would refuse but Updraft can still train (say, a concat between an
/// updatable layer and the loss, which Core ML cannot back-propagate through), or that are
/// probably mistakes (an updatable layer the loss does not depend on).
/// One problem found by `ModelValidator.validate(_:)`: severity, message, the layers concerned and a hint.
public struct ValidationFinding: Hashable, Sendable, CustomStringConvertible {
    /// `error`: Core ML would refuse the model and Updraft will not train it; `warning`: Updraft can still train it.
    public enum Severity: String, Hashable, Sendable { case error, warning }
    /// How serious the finding is.
    public var severity: Severity
    /// What is wrong, in one sentence.
    public var message: String
    /// The layer concerned, if any.
    public var layer: String?
    /// What to do about it, if there is something.
    public var hint: String?
    /// Every layer concerned, for a finding about several (unsupported layers of one type).
    public var layers: [String]

    /// A finding; `layers` defaults to `[layer]` (empty without a layer).
    public init(_ severity: Severity, _ message: String, layer: String? = nil, hint: String? = nil, layers: [String]? = nil) {
        self.severity = severity; self.message = message; self.layer = layer; self.hint = hint
        self.layers = layers ?? layer.map { [$0] } ?? []
    }

    /// "error: message" or "warning: message", with the hint on an indented second line.
    public var description: String { "\(severity.rawValue): \(message)" + (hint.map { "\n  hint: \($0)" } ?? "") }
}

public extension Array where Element == ValidationFinding {
    var errors: [ValidationFinding] { filter { $0.severity == .error } }
    var warnings: [ValidationFinding] { filter { $0.severity == .warning } }
}

/// Checks a model against Core ML's rules for updatable models and against what Updraft can run: errors for what neither would train, warnings for what Core ML refuses but Updraft trains, or likely mistakes.
public enum ModelValidator {
    /// Layer types and activations Core ML can back-propagate through.
    static func coreMLCanBackpropagate(_ layer: LayerSpec) -> Bool {
        switch layer.params {
        case .convolution, .innerProduct, .flatten, .pooling, .batchnorm, .softmax: return true
        case let .activation(a):
            switch a.activation {
            case .relu?, .sigmoid?, .tanh?: return true
            default: return false
            }
        default: return false
        }
    }

    /// An index (argMax, argMin, the reduce layer's ARGMAX): no gradient passes through it, in Core ML or Updraft.
    static func hasNoGradient(_ layer: LayerSpec) -> Bool {
        switch layer.params {
        case let .reduceND(r): return r.kind.kind.isIndex
        case let .reduce(r): return ReduceMode.reduceLayer(mode: r.mode)?.kind.isIndex ?? false
        default: return false
        }
    }

    /// Every finding for `model`, errors and warnings in check order; empty when the model is valid and trainable. Never throws.
    /// - Parameter forUpdate: false checks only that the model runs (a pipeline's frozen feature
    ///   extractor): a model with nothing updatable is then no error.
    public static func validate(_ model: CoreMLModel, forUpdate: Bool = true) -> [ValidationFinding] {
        var findings: [ValidationFinding] = []
        func error(_ m: String, layer: String? = nil, hint: String? = nil) { findings.append(ValidationFinding(.error, m, layer: layer, hint: hint)) }
        func warning(_ m: String, layer: String? = nil) { findings.append(ValidationFinding(.warning, m, layer: layer)) }

        let spec = model.spec
        let description = spec.description
        let layers = spec.network.layers

        // Names.
        var layerNames: Set<String> = []
        for l in layers {
            if l.name.isEmpty { error("a \(l.typeName) layer has no name") }
            if !layerNames.insert(l.name).inserted { error("layer name '\(l.name)' is used more than once", layer: l.name) }
        }
        for (list, what) in [(description.inputs, "input"), (description.outputs, "output"),
                             (description.trainingInputs, "training input")] {
            var seen: Set<String> = []
            for f in list where !seen.insert(f.name).inserted { error("\(what) feature '\(f.name)' is listed more than once") }
        }

        // The graph: everything Updraft must be able to run, every problem at once (unsupported
        // layers grouped by type). `graph` is nil unless it was built whole.
        let (partial, problems) = NetworkGraph.checked(model)
        let graph: NetworkGraph? = problems.isEmpty ? partial : nil
        for g in problems.groups {
            findings.append(ValidationFinding(.error, g.message, layer: g.layers.first, hint: g.hint, layers: g.layers))
        }

        // Weights that are not numbers: every prediction through them is NaN, and training cannot fix them.
        for layer in partial.layers {
            var tensors: [(String, [Float])] = []
            if let w = layer.weights { tensors.append(("weights", w.data)) }
            if let b = layer.bias { tensors.append(("bias", b.data)) }
            if let (scale, shift) = layer.op.channelScaleShift { tensors += [("\(layer.op.name) scale", scale), ("\(layer.op.name) shift", shift)] }
            for (what, values) in tensors {
                let bad = values.reduce(0) { $0 + ($1.isFinite ? 0 : 1) }
                guard bad > 0, let first = values.firstIndex(where: { !$0.isFinite }) else { continue }
                error("layer '\(layer.name)' has \(bad) non-finite \(what) value\(bad == 1 ? "" : "s") (the first, at index \(first), is \(values[first]))",
                      layer: layer.name)
            }
        }

        // Outputs come from somewhere.
        let produced = Set(layers.flatMap(\.outputs))
        for o in description.outputs where !produced.contains(o.name) {
            if spec.network.kind == .classifier && o.name == description.predictedFeatureName { continue }
            error("output '\(o.name)' is not produced by any layer")
        }
        if spec.network.kind == .classifier {
            if spec.network.classLabels == nil || spec.network.classLabels?.count == 0 {
                error("the classifier has no class labels")
            }
        }
        if let scaler = model.imageScaler, scaler.channelScale == 0 {
            warning("the image scaler's channelScale is 0, so every pixel becomes its channel's bias")
        }

        // Float16 weights anywhere.
        for l in layers {
            var encodings: [WeightEncoding] = []
            if let (w, b) = l.weightParams { encodings = [w.encoding] + (b.map { [$0.encoding] } ?? []) }
            if case let .batchnorm(bn) = l.params { encodings = [bn.gamma, bn.beta, bn.mean, bn.variance].map(\.encoding) }
            if encodings.contains(.float16), spec.isUpdatable, !l.isUpdatable {
                warning("layer '\(l.name)' stores float16 weights; Core ML refuses to update models with float16 weights anywhere, Updraft widens them to float32 and can train",
                        layer: l.name)
            }
        }

        // Updatability.
        let candidates = layers.filter(UpdatablePlan.canBeUpdatable).map(\.name)
        let makeUpdatable = "updraft make-updatable MODEL --layers " + (candidates.last ?? "L1,L2")
            + " --out OUT (CoreMLModel.makingUpdatable); layers that can be updatable: "
            + (candidates.isEmpty ? "none" : candidates.prefix(12).joined(separator: ", ") + (candidates.count > 12 ? ", …" : ""))
        guard spec.isUpdatable || spec.network.updateParameters != nil || layers.contains(where: \.isUpdatable) else {
            guard forUpdate else { return findings }
            error("the model is not updatable (isUpdatable is false and it has no update parameters)", hint: makeUpdatable)
            return findings
        }
        if !spec.isUpdatable { error("the model is not marked updatable (Model.isUpdatable is false)", hint: makeUpdatable) }
        if spec.specificationVersion < 4 {
            error("specificationVersion is \(spec.specificationVersion); updatable models need 4 or later", hint: makeUpdatable)
        }

        let updatable = layers.filter(\.isUpdatable)
        if updatable.isEmpty { error("no layer is marked updatable", hint: makeUpdatable) }
        for l in updatable {
            guard let (w, b) = l.weightParams else {
                error("layer '\(l.name)' is a \(l.typeName) layer; only convolution and innerProduct layers can be updatable", layer: l.name)
                continue
            }
            if !w.isUpdatable { error("layer '\(l.name)' is updatable but its weights are not flagged isUpdatable", layer: l.name) }
            if LayerShapes.hasBias(l), let b, !b.isUpdatable {
                error("layer '\(l.name)' is updatable but its bias is not flagged isUpdatable", layer: l.name)
            }
            for (params, what) in [(w, "weights"), (b ?? w, "bias")] where params.encoding != .float32 && params.encoding != .empty {
                error("layer '\(l.name)' is updatable but its \(what) are stored as \(params.encoding); only float32 weights can be updated",
                      layer: l.name)
            }
            if case let .convolution(c) = l.params, c.isDeconvolution {
                error("layer '\(l.name)' is an updatable deconvolution, which cannot be updated", layer: l.name)
            }
        }
        for l in layers where !l.isUpdatable {
            if let (w, b) = l.weightParams, w.isUpdatable || (b?.isUpdatable ?? false) {
                warning("layer '\(l.name)' flags its weights isUpdatable but the layer itself is not updatable; it stays frozen",
                        layer: l.name)
            }
        }

        guard let update = spec.network.updateParameters else {
            error("the model has no update parameters (updateParams: loss, optimizer, epochs)", hint: makeUpdatable)
            return findings
        }
        validateLoss(model, update, layerNames: layerNames, graph: graph, error: { error($0, layer: $1) }, warning: warning)
        validateHyperparameters(update, error: { error($0, hint: $1) })
        // What `plan` and `train` compute from the default mini-batch size: the same checks, so a
        // model called valid here never fails (or traps) there on sizes.
        if let graph, let batch = update.optimizer?.miniBatchSize?.defaultValue, batch > 0 {
            do {
                try SizeLimits.checkBatchSize(Int(clamping: batch), graph: graph, source: "the default mini-batch size")
                _ = try GraphAnalysis(graph: graph, batch: Int(clamping: batch))
            } catch let e as UpdraftError {
                error(e.message, hint: e.hint)
            } catch let e {
                error("\(e)")
            }
        }
        if let graph, let sizes = update.optimizer?.miniBatchSize {
            for f in checkAllowedBatchSizes(sizes, graph: graph) { findings.append(f) }
        }

        // Training inputs: the prediction inputs plus the target.
        for input in description.inputs where description.trainingInput(named: input.name) == nil {
            error("training inputs lack the prediction input '\(input.name)'")
        }

        // Gradient paths from the loss to each updatable layer.
        if let loss = update.lossLayers.first {
            checkGradientPaths(layers, updatable: updatable, lossInput: loss.input, lossName: loss.name,
                               error: { error($0, layer: $1, hint: "an index cannot be trained through: make only layers after it updatable, or take the loss before it") },
                               warning: warning)
        }
        return findings
    }

    private static func validateLoss(_ model: CoreMLModel, _ update: UpdateParameters, layerNames: Set<String>,
                                     graph: NetworkGraph?, error: (String, String?) -> Void, warning: (String, String?) -> Void) {
        let losses = update.lossLayers
        guard let loss = losses.first else {
            error("the update parameters have no loss layer", nil)
            return
        }
        if losses.count > 1 { error("the model has \(losses.count) loss layers; Core ML allows one (Updraft uses '\(loss.name)')", nil) }
        if loss.name.isEmpty { error("the loss layer has no name", nil) }
        if layerNames.contains(loss.name) { error("loss layer name '\(loss.name)' is also a layer name", nil) }
        guard let kind = loss.kind else {
            error("loss layer '\(loss.name)' has an unknown loss type (LossLayer field \(loss.unknownTypeField ?? 0)); Core ML offers categorical cross-entropy and mean squared error", nil)
            return
        }
        let producer = model.layers.first { $0.outputs.contains(loss.input) }
        switch kind {
        case .categoricalCrossEntropy:
            if let p = producer {
                if case .softmax = p.params {} else {
                    error("cross-entropy loss '\(loss.name)' reads '\(loss.input)', the output of \(p.typeName) layer '\(p.name)'; it must read a softmax output", p.name)
                }
            } else {
                error("cross-entropy loss '\(loss.name)' reads '\(loss.input)', which no layer produces", nil)
            }
        case .meanSquaredError:
            if producer == nil { error("mean-squared-error loss '\(loss.name)' reads '\(loss.input)', which no layer produces", nil) }
        }
        if model.lossTargetFeature == nil {
            let names = model.modelDescription.trainingInputs.map(\.name)
            error("loss '\(loss.name)' has target '\(loss.target)', which is not among the training inputs (\(names.isEmpty ? "none" : names.joined(separator: ", ")))", nil)
        } else if let problem = graph?.lossProblem {
            error(problem.message, nil)
        }
    }

    private static func validateHyperparameters(_ update: UpdateParameters, error report: (String, String?) -> Void) {
        // Every problem here is one `updraft make-updatable` fixes; the hint names its options.
        var option = ""
        func error(_ message: String, _ unused: String?) {
            report(message, "updraft make-updatable MODEL \(option) --out MODEL (CoreMLModel.makingUpdatable)")
        }
        func checkDouble(_ p: DoubleParameter?, _ name: String, _ flag: String, required: Bool, positive: Bool) {
            option = "--\(flag) X --allowed-\(flag) MIN..MAX"
            guard let p else {
                if required { error("the optimizer has no \(name)", nil) }
                return
            }
            if !p.defaultValue.isFinite { error("\(name) default \(p.defaultValue) is not a finite number", nil) }
            if positive, !(p.defaultValue > 0) { error("\(name) default \(formatHyperparameter(p.defaultValue)) must be greater than 0", nil) }
            if let r = p.range {
                if r.min > r.max { error("\(name) range [\(formatHyperparameter(r.min)), \(formatHyperparameter(r.max))] is empty (min > max)", nil) }
                if !r.contains(p.defaultValue) {
                    error("\(name) default \(formatHyperparameter(p.defaultValue)) is outside its allowed range [\(formatHyperparameter(r.min)), \(formatHyperparameter(r.max))]", nil)
                }
            }
        }
        func checkInt(_ p: Int64Parameter?, _ name: String, _ flag: String, _ allowedFlag: String, required: Bool) {
            option = "--\(flag) N --\(allowedFlag) A,B,C|MIN..MAX"
            guard let p else {
                if required { error("the update parameters have no \(name)", nil) }
                return
            }
            if p.defaultValue <= 0 { error("\(name) default \(p.defaultValue) must be greater than 0", nil) }
            // Every allowed value must be one a run could take, not only the default.
            let bad = p.allowed.map { a -> [Int64] in
                switch a { case let .set(v): return v.filter { $0 <= 0 }; case let .range(lo, _): return lo <= 0 ? [lo] : [] }
            } ?? []
            if !bad.isEmpty { error("\(name) allows \(bad.map(String.init).joined(separator: ", ")), which a run cannot take: every allowed value must be 1 or more", nil) }
            switch p.allowed {
            case let .set(values)?:
                if values.isEmpty { error("\(name) allows an empty set of values", nil) }
                else if !values.contains(p.defaultValue) {
                    error("\(name) default \(p.defaultValue) is not in its allowed set {\(values.map(String.init).joined(separator: ", "))}", nil)
                }
            case let .range(lo, hi)?:
                if lo > hi { error("\(name) range [\(lo), \(hi)] is empty (min > max)", nil) }
                else if !(lo...hi).contains(p.defaultValue) { error("\(name) default \(p.defaultValue) is outside its allowed range [\(lo), \(hi)]", nil) }
            case nil: break
            }
        }
        if let o = update.optimizer {
            checkDouble(o.learningRate, "learning rate", "learning-rate", required: true, positive: true)
            checkInt(o.miniBatchSize, "mini-batch size", "batch-size", "allowed-batch-sizes", required: true)
            switch o.kind {
            case .sgd:
                checkDouble(o.momentum, "momentum", "momentum", required: false, positive: false)
            case .adam:
                checkDouble(o.beta1, "beta1", "beta1", required: false, positive: false)
                checkDouble(o.beta2, "beta2", "beta2", required: false, positive: false)
                checkDouble(o.eps, "eps", "eps", required: false, positive: true)
            default:
                option = "--optimizer sgd|adam"
                error("the update parameters name \(o.kind.optimizerType.name), which a Core ML model cannot hold (SGD or Adam only)", nil)
            }
        } else {
            option = "--optimizer sgd|adam"
            error("the update parameters have no optimizer (SGD or Adam)", nil)
        }
        checkInt(update.epochs, "epochs", "epochs", "allowed-epochs", required: true)
        option = "--seed S"
        if let seed = update.seed, seed.defaultValue < 0 { error("seed default \(seed.defaultValue) is negative", nil) }
    }

    /// Every mini-batch size the model allows, not only its default: an error for the sizes the network
    /// cannot hold (`SizeLimits`), and a warning for those whose training would not fit this host's
    /// memory (`MemoryPreflight` on the host backend), naming the largest that fits. A range is checked
    /// at its ends (both limits grow with the size).
    static func checkAllowedBatchSizes(_ sizes: Int64Parameter, graph: NetworkGraph) -> [ValidationFinding] {
        let allowed: [Int]
        switch sizes.allowed {
        case let .set(v)?: allowed = v.filter { $0 > 0 }.map { Int(clamping: $0) }.sorted()
        case let .range(lo, hi)?: allowed = lo > 0 && lo <= hi ? [Int(clamping: lo), Int(clamping: hi)] : []
        case nil: allowed = []
        }
        let largest = SizeLimits.largestBatchSize(graph)
        var findings: [ValidationFinding] = []
        let tooLarge = allowed.filter { $0 > largest }
        if !tooLarge.isEmpty {
            findings.append(ValidationFinding(.error,
                "allowed mini-batch size\(tooLarge.count > 1 ? "s" : "") \(tooLarge.map(String.init).joined(separator: ", ")) cannot be held: a mini-batch would have more than \(SizeLimits.maxBatchElements) values (the largest this model allows is \(largest))",
                hint: "allow only sizes up to \(largest) (updraft make-updatable --allowed-batch-sizes)"))
        }
        guard let biggest = allowed.last(where: { $0 <= largest }), biggest > Int(clamping: sizes.defaultValue) else { return findings }
        let host = Scheduler.makeHostBackend()
        do {
            try MemoryPreflight.check(graph: graph, batchSize: biggest, work: .training, prefix: host, tail: host)
        } catch let e as UpdraftError {
            findings.append(ValidationFinding(.warning, "on this host, the largest allowed mini-batch size does not fit: \(e.message)"))
        } catch {
            findings.append(ValidationFinding(.warning, "the largest allowed mini-batch size \(biggest) could not be checked: \(error)"))
        }
        return findings
    }

    /// Warns about layers between an updatable layer and the loss that Core ML cannot
    /// back-propagate through, and about updatable layers the loss does not depend on; an index
    /// among them (no gradient at all) is an error.
    private static func checkGradientPaths(_ layers: [LayerSpec], updatable: [LayerSpec], lossInput: String,
                                           lossName: String, error: (String, String?) -> Void, warning: (String, String?) -> Void) {
        var producer: [String: Int] = [:]
        var consumers: [String: [Int]] = [:]
        for (i, l) in layers.enumerated() {
            for o in l.outputs where producer[o] == nil { producer[o] = i }
            for b in l.inputs { consumers[b, default: []].append(i) }
        }
        // Layers the loss depends on.
        var upstream: Set<Int> = []
        var stack = producer[lossInput].map { [$0] } ?? []
        while let i = stack.popLast() {
            guard upstream.insert(i).inserted else { continue }
            for b in layers[i].inputs { if let p = producer[b] { stack.append(p) } }
        }
        // Per layer, the blockers on its way to the loss (downstream, among the layers the loss
        // depends on), in one pass in reverse topological order: linear in the model's length. Each
        // list keeps the first `shown` blockers by position; `more` counts whether there were others.
        guard let order = try? NetworkGraph.topologicalOrder(layers, producer: producer) else { return }
        let shown = 8
        var below = [[Int]](repeating: [], count: layers.count), more = [Bool](repeating: false, count: layers.count)
        for i in order.reversed() {
            var found: Set<Int> = []
            var extra = false
            for c in Set(layers[i].outputs.flatMap { consumers[$0] ?? [] }) where upstream.contains(c) {
                if !coreMLCanBackpropagate(layers[c]) { found.insert(c) }
                found.formUnion(below[c])
                extra = extra || more[c]
            }
            let sorted = found.sorted()
            below[i] = Array(sorted.prefix(shown))
            more[i] = extra || sorted.count > shown
        }
        var index: [String: Int] = [:]
        for (i, l) in layers.enumerated() where index[l.name] == nil { index[l.name] = i }
        for u in updatable {
            guard let start = index[u.name] else { continue }
            guard upstream.contains(start) else {
                warning("layer '\(u.name)' is updatable but loss '\(lossName)' does not depend on it; it will not change", u.name)
                continue
            }
            let blockers = below[start].map { layers[$0] }
            if let index = blockers.first(where: hasNoGradient) {
                error("layer '\(u.name)' cannot be updated: the gradient from loss '\(lossName)' passes through \(index.typeName) layer '\(index.name)', which has no gradient",
                      u.name)
            } else if !blockers.isEmpty {
                let names = blockers.map { "\($0.typeName) layer '\($0.name)'" }.joined(separator: ", ") + (more[start] ? " and more" : "")
                warning("Core ML would refuse to update '\(u.name)': the gradient from loss '\(lossName)' passes through \(names), which Core ML cannot back-propagate through; Updraft can still train it",
                        u.name)
            }
        }
    }
}

extension ModelValidator {
    /// The findings for a model that takes one vector of `dimension` values (a GLM's or a k-NN's input):
    /// one input, a multi-array whose shape (when it states one) holds `dimension` values.
    public static func vectorInput(_ spec: ModelSpec, dimension: Int, of kind: String) -> [ValidationFinding] {
        let inputs = spec.description.inputs
        guard inputs.count == 1 else {
            return [ValidationFinding(.error, "a \(kind) takes one input, this one declares \(inputs.count)")]
        }
        guard case let .multiArray(a) = inputs[0].type else {
            return [ValidationFinding(.error, "the \(kind)'s input '\(inputs[0].name)' is \(inputs[0].type), not a vector (multiArray)")]
        }
        let count = a.shape.reduce(1, *)
        guard a.shape.isEmpty || count == dimension else {
            return [ValidationFinding(.error, "the \(kind)'s input '\(inputs[0].name)' holds \(count) values but the model takes \(dimension)-dimensional vectors")]
        }
        return []
    }
}
