import UpdraftCore
import UpdraftBackends
import UpdraftModel

/// The layer kinds the executor, the cost model and the half-precision planner read: one type per
/// kind (this folder, a file each), registered in `LayerOp.kind`. The executor's passes, `CostModel`
/// and `HalfPrecisionEffect` hold no `switch` over layer kinds: they ask the layer's kind. Kinds
/// see the executor only through `LayerContext`, so this folder depends on the graph and the
/// backends, never on Training/ or Scheduling/.
///
/// Adding a kind: a `LayerOp` case (Graph/NetworkGraph.swift), its shape rule (Graph/ShapeInference),
/// a type here conforming to `LayerKind`, and its row in `LayerOp.kind` below. The kind calls the
/// `Backend` methods (Backends/) that run it on every device.
package protocol LayerKind {
    /// Runs the layer forward for `call.batch` examples: `call.inputs` in, `call.output` written.
    static func forward(_ call: ForwardCall) throws
    /// Backward for one layer of the trained tail: parameter gradients where the layer is trained
    /// (then `call.gradientsReady()`), input gradients for the inputs that carry one.
    static func backward(_ call: BackwardCall) throws
    /// The kernels the layer runs for a batch of `batch`: forward always, backward parts as asked.
    static func work(_ layer: GraphLayer, batch: Int, optimizer: OptimizerKind,
                     backwardData: Bool, backwardWeights: Bool) throws -> LayerWork
    /// A kernel that reads and writes IEEE-half storage itself ran (true), or there is none for
    /// this layer (false: the executor converts at the layer's boundary and runs it in fp32).
    static func forwardHalfStored(_ call: ForwardCall, storage: HalfStorage, slice: TrainingGraph.ConcatSlice?) throws -> Bool
    /// Whether the OpenCL backend has a half-storage kernel for this layer (what `updraft plan` reports).
    /// `runsInsideAnother`: the layer is fused into, or written by, another layer's kernel (by default
    /// it then stores halves the way that kernel does).
    static func hasHalfKernel(_ layer: GraphLayer, runsInsideAnother: Bool) -> Bool
    /// An element-wise function that follows this layer may be fused into its kernel as an epilogue.
    static var acceptsEpilogue: Bool { get }
    /// What runs the layer's forward pass (or, with `backward`, its gradients; `inputGradient`: the
    /// input's too) on `backend`, as a profile names it: an algorithm or library the backend chose
    /// for the shape. By default the backend's own loops or kernels.
    static func engine(_ layer: GraphLayer, batch: Int, backward: Bool, inputGradient: Bool, on backend: Backend) -> String
    /// Makes on `call.backend` the per-shape objects the layer's passes will use for `call.batch`
    /// (`Backend.prepare*`, Backends/DeviceOps+Preparation.swift), before the first step; returns how
    /// many it made or asked for. By default the shape-independent code of its `kernelFamilies`.
    static func prepare(_ call: PrepareCall) throws -> Int
    /// The shape-independent op families the layer's passes launch (on OpenCL: a program each, built
    /// before the first step by the default `prepare`). By default none.
    static func kernelFamilies(_ op: LayerOp) -> [KernelFamily]
    /// Whether the layer computes each image from that image alone, so that it runs the same on any
    /// split of the batch (`PrefixChunking` runs such layers a few images at a time). By default not.
    static func computesEachImageAlone(_ op: LayerOp) -> Bool
}

extension LayerKind {
    static func forwardHalfStored(_ call: ForwardCall, storage: HalfStorage, slice: TrainingGraph.ConcatSlice?) throws -> Bool {
        false
    }
    static func hasHalfKernel(_ layer: GraphLayer, runsInsideAnother: Bool) -> Bool { runsInsideAnother }
    static var acceptsEpilogue: Bool { false }
    static func engine(_ layer: GraphLayer, batch: Int, backward: Bool, inputGradient: Bool, on backend: Backend) -> String {
        backend.ownEngine
    }
    static func prepare(_ call: PrepareCall) throws -> Int {
        let families = kernelFamilies(call.layer.op)
        return families.isEmpty ? 0 : try call.backend.prepareKernels(families)
    }
    static func kernelFamilies(_ op: LayerOp) -> [KernelFamily] { [] }
    static func computesEachImageAlone(_ op: LayerOp) -> Bool { false }
}

extension Backend {
    /// Updraft's own loops (with the CPU's vector level) or kernels, as a profile names them.
    package var ownEngine: String {
        switch innermost {
        case is OpenCLBackend: return "Updraft kernel"
        case is CPUBackend: return "Updraft loops (\(CPUVectorLevel.active))"
        default: return "reference"
        }
    }

}

extension LayerOp {
    /// The registry: the kind that runs, costs and plans each op.
    package var kind: any LayerKind.Type {
        switch self {
        case .convolution: return ConvolutionLayer.self
        case .innerProduct: return InnerProductLayer.self
        case .activation: return ActivationLayer.self
        case .pooling: return PoolingLayer.self
        case .concat: return ConcatLayer.self
        case .softmax: return SoftmaxLayer.self
        case .flatten: return FlattenLayer.self
        case .batchnorm: return BatchnormLayer.self
        case .add, .multiply: return ElementwiseLayer.self
        case .spatial, .instanceNormalization: return SpatialLayer.self
        case .broadcast, .constant, .reduce: return BroadcastLayer.self
        case .layout: return LayoutLayer.self
        case let .family(f): return (type(of: f.base) as? any FamilyLayerKind.Type)?.kind ?? UnregisteredFamilyLayer.self
        }
    }
}

/// An open family's op names its kind by conforming (next to the kind: `LayerNormalizationLayer.swift`).
package protocol FamilyLayerKind: LayerFamilyOp {
    static var kind: any LayerKind.Type { get }
}

/// The kind of a family op that names none: every pass says so, by the op's name.
enum UnregisteredFamilyLayer: LayerKind {
    static func refuse(_ layer: GraphLayer) -> UpdraftError {
        UpdraftError(.unsupported, "layer '\(layer.name)' (\(layer.op.name)): its op family has no layer kind",
                     hint: "conform the family's op to FamilyLayerKind next to its LayerKind (Sources/UpdraftLayers/Layers)")
    }
    static func forward(_ c: ForwardCall) throws { throw refuse(c.layer) }
    static func backward(_ c: BackwardCall) throws { throw refuse(c.layer) }
    static func work(_ layer: GraphLayer, batch: Int, optimizer: OptimizerKind,
                     backwardData: Bool, backwardWeights: Bool) throws -> LayerWork { throw refuse(layer) }
}

/// A layer's parameters on its device: weights and bias (convolution, inner product, constant), or
/// the per-channel scale and shift of a channel affine (batchnorm, instance normalization).
package struct LayerParameterBuffers {
    package var weights: DeviceBuffer?
    package var bias: DeviceBuffer?
    package var scale: DeviceBuffer?
    package var shift: DeviceBuffer?

    package init(weights: DeviceBuffer? = nil, bias: DeviceBuffer? = nil, scale: DeviceBuffer? = nil, shift: DeviceBuffer? = nil) {
        self.weights = weights; self.bias = bias; self.scale = scale; self.shift = shift
    }
}

/// What a layer kind asks of the executor that runs it (`Executor` conforms).
package protocol LayerContext: AnyObject {
    /// The trained graph: which functions are fused into the layer before them.
    var training: TrainingGraph { get }
    /// The layer's parameters on its device.
    func params(_ layer: GraphLayer) -> LayerParameterBuffers
    /// The gradient buffers of a trained layer's weights and bias; nil when the layer is frozen.
    func parameterGradients(_ layer: GraphLayer) -> (weights: DeviceBuffer, bias: DeviceBuffer?)?
    /// The layer's parameter gradients are complete (a multi-rank run starts exchanging them).
    func parameterGradientsReady(_ layer: GraphLayer) throws
    /// A blob's value on `backend`, copied across when it was computed on another.
    func value(_ blob: String, on backend: Backend, ws: Workspace, acceptsHalf: Bool) throws -> DeviceBuffer
}

/// What a layer's forward pass is handed: its inputs and output on one backend, for `batch` examples.
package struct ForwardCall {
    let executor: LayerContext
    let layer: GraphLayer
    let inputs: [DeviceBuffer]
    let output: DeviceBuffer
    /// A fused element-wise function to apply to the output (kinds with `acceptsEpilogue` only).
    let epilogue: Activation?
    /// A fused residual add's other input, added before `epilogue` (convolutions only: `TrainingGraph.fusedResiduals`).
    let residual: DeviceBuffer?
    let batch: Int
    let backend: Backend

    package init(executor: LayerContext, layer: GraphLayer, inputs: [DeviceBuffer], output: DeviceBuffer, epilogue: Activation?,
                 residual: DeviceBuffer? = nil, batch: Int, backend: Backend) {
        self.executor = executor; self.layer = layer; self.inputs = inputs; self.output = output
        self.epilogue = epilogue; self.residual = residual; self.batch = batch; self.backend = backend
    }

    /// The layer's parameters on its device (weights, bias; channel scale and shift).
    var parameters: LayerParameterBuffers { executor.params(layer) }
    /// The output's NCHW shape for this batch.
    var outputShape: Shape { layer.outputShape.withBatch(batch) }
}

/// What a layer's backward pass is handed: the output gradient, and the workspace to take input
/// gradients from and give them to.
package struct BackwardCall {
    let executor: LayerContext
    let layer: GraphLayer
    let ws: Workspace
    let backend: Backend
    /// dL/d(output) for the batch.
    let outputGradient: DeviceBuffer
    /// Per input: whether it carries a gradient (an earlier trained layer needs it).
    let wantsInput: [Bool]

    package init(executor: LayerContext, layer: GraphLayer, ws: Workspace, backend: Backend, outputGradient: DeviceBuffer, wantsInput: [Bool]) {
        self.executor = executor; self.layer = layer; self.ws = ws; self.backend = backend
        self.outputGradient = outputGradient; self.wantsInput = wantsInput
    }

    var batch: Int { ws.batch }
    var parameters: LayerParameterBuffers { executor.params(layer) }
    var outputShape: Shape { layer.outputShape.withBatch(batch) }

    /// Input `i`'s forward value. A function fused into its convolution has no stored input; its
    /// backward reads only y, which it is handed instead.
    func input(_ i: Int) throws -> DeviceBuffer {
        if let v = ws.value(layer.inputs[i]) { return v.buffer }
        if executor.training.fusedActivationNames.contains(layer.name), let v = ws.value(layer.output) { return v.buffer }
        throw UpdraftError(.invalidModel, "blob '\(layer.inputs[i])' is needed for backward but was not kept")
    }

    /// The layer's forward output, if it was kept.
    var output: DeviceBuffer? { ws.value(layer.output)?.buffer }

    /// Input `i`'s value on this backend (copied across when it was computed elsewhere).
    func value(ofInput i: Int) throws -> DeviceBuffer { try executor.value(layer.inputs[i], on: backend, ws: ws, acceptsHalf: false) }
    /// The output's value on this backend.
    func outputValue() throws -> DeviceBuffer { try executor.value(layer.output, on: backend, ws: ws, acceptsHalf: false) }

    /// A buffer for input `i`'s gradient.
    func newInputGradient(_ i: Int) throws -> DeviceBuffer {
        try ws.acquire(layer.inputShapes[i].withBatch(batch).count, on: backend)
    }

    /// Adds `gradient` into input `i`'s gradient (the workspace takes the buffer).
    func addInputGradient(_ i: Int, _ gradient: DeviceBuffer) throws {
        try ws.addGradient(layer.inputs[i], gradient, on: backend)
    }

    /// The gradient buffers of a trained layer's weights and bias; nil when the layer is frozen.
    var parameterGradients: (weights: DeviceBuffer, bias: DeviceBuffer?)? { executor.parameterGradients(layer) }

    /// Tells the executor's listener (gradient exchange) that this layer's parameter gradients are complete.
    func gradientsReady() throws { try executor.parameterGradientsReady(layer) }

    /// The usual backward of a one-input layer: when input 0 carries a gradient, a buffer for it that
    /// `body` fills, then added into the input's gradient.
    func inputGradient(_ body: (_ dx: DeviceBuffer) throws -> Void) throws {
        guard wantsInput[0] else { return }
        let dx = try newInputGradient(0)
        try body(dx)
        try addInputGradient(0, dx)
    }

    /// The backward of a layer with weights (convolution, inner product): `parameters` fills the
    /// weight and bias gradients when the layer is trained (then the listener hears of it), then
    /// `input` the input's gradient when it carries one.
    func weightedBackward(parameters: (_ weights: DeviceBuffer, _ bias: DeviceBuffer?) throws -> Void,
                          input: (_ dx: DeviceBuffer) throws -> Void) throws {
        if let grads = parameterGradients {
            try parameters(grads.weights, grads.bias)
            try gradientsReady()
        }
        try inputGradient(input)
    }
}

extension LayerWork {
    /// One kernel forward and, when asked, one backward for the input gradient.
    static func passes(forward: OpCost, backward: OpCost, backwardData: Bool) -> LayerWork {
        var w = LayerWork()
        w.forward = [KernelWork(forward)]
        if backwardData { w.backwardData = [KernelWork(backward)] }
        return w
    }

    /// A pass that reads `count` floats and writes `count`, with no arithmetic (a copy, a concat).
    static func copy(count: Int, backwardData: Bool) -> LayerWork {
        let pass = OpCost(flops: 0, bytes: f32Bytes(count, count))
        return passes(forward: pass, backward: pass, backwardData: backwardData)
    }
}

/// What a layer's preparation is handed (`LayerKind.prepare`): the layer as its passes will run it.
package struct PrepareCall {
    let layer: GraphLayer
    let batch: Int
    let backend: Backend
    /// The passes that will run: forward, and for a trained tail layer its gradients.
    let passes: PreparedPasses
    /// The element-wise function fused into the forward pass (kinds with `acceptsEpilogue` only).
    let epilogue: Activation?
    /// Channels per image of the buffer the forward pass writes: a convolution writing its slice of a
    /// concat writes into the concat's output; nil: the layer's own output.
    let outputChannels: Int?
    /// A convolution adds a residual in its forward epilogue (`TrainingGraph.fusedResiduals`).
    let residual: Bool

    package init(layer: GraphLayer, batch: Int, backend: Backend, passes: PreparedPasses, epilogue: Activation?,
                 outputChannels: Int?, residual: Bool = false) {
        self.layer = layer; self.batch = batch; self.backend = backend; self.passes = passes
        self.epilogue = epilogue; self.outputChannels = outputChannels; self.residual = residual
    }
}
