import UpdraftCore

// Preparation: the per-shape objects a backend would otherwise make on a layer's first call, made once
// when a training run is set up, so that they do not land inside the first epoch: oneDNN's JIT-compiled
// primitives and their scratch on the CPU (CPUBackend+Preparation.swift), the programs the kernels are
// built from on OpenCL (OpenCLBackend+Preparation.swift: asked for by each op, then built together,
// several at once, by `finishPreparation`). Each op returns how many objects it made or asked for (0
// where everything was made already, or where the backend makes nothing ahead: the reference has no
// state). The executor calls them per layer and batch size (`Executor.prepare(batch:)`, Training/).

public extension BackendCall.Kind {
    static let prepareConvolution = Self("prepareConvolution"), preparePooling = Self("preparePooling")
    static let prepareInnerProduct = Self("prepareInnerProduct"), prepareKernels = Self("prepareKernels")
    static let finishPreparation = Self("finishPreparation")
}

/// The op families whose device code does not depend on the shape: one OpenCL program each
/// (Kernels/<rawValue>.cl built with the backend's fixed defines), nothing to make on the CPU. A layer
/// kind names the families its passes launch (`Backend.prepareKernels`). Open: a new op family declares
/// its own (`static let` in an extension, next to its ops), named for its `.cl` file.
public struct KernelFamily: Hashable, Sendable {
    /// The program's file in Kernels/, without ".cl".
    public let rawValue: String
    public init(_ file: String) { rawValue = file }

    public static let activation = Self("activation"), elementwise = Self("elementwise"), pooling = Self("pooling")
    public static let softmax = Self("softmax"), concat = Self("concat"), layout = Self("layout")
    public static let optimizers = Self("optimizers"), pixels = Self("pixels"), normalization = Self("normalization")
    public static let padding = Self("padding"), resampling = Self("resample"), broadcast = Self("broadcast")
    public static let gemmReduce = Self("gemm_reduce")
}

/// Which passes of a layer a preparation makes ready: forward, and for a trained tail layer the
/// input gradient (`backwardData`) and the weight gradient (`backwardWeights`).
public struct PreparedPasses: OptionSet, Hashable, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let forward = PreparedPasses(rawValue: 1 << 0)
    public static let backwardData = PreparedPasses(rawValue: 1 << 1)
    public static let backwardWeights = PreparedPasses(rawValue: 1 << 2)
    public static let all: PreparedPasses = [.forward, .backwardData, .backwardWeights]
}

extension DeviceOps {
    /// Makes ready what `g`'s `passes` will use: the forward pass as the executor calls it, with the
    /// `epilogue` fused and each image's output `outputChannels` channels apart (more than
    /// `g.outChannels` where it writes its slice of a concat).
    public struct PrepareConvolution: DeviceOp {
        public let g: ConvGeometry, passes: PreparedPasses, epilogue: Activation?, outputChannels: Int
        /// The forward pass adds a residual in its epilogue (`TrainingGraph.fusedResiduals`).
        public var residual = false
        public static var kind: BackendCall.Kind { .prepareConvolution }
        public var detail: String { g.callDetail }
        public func run(on b: CPUBackend) throws -> Int {
            try b.prepareConvolution(g, passes: passes, epilogue: epilogue, outputChannels: outputChannels)
        }
        public func run(on b: OpenCLBackend) throws -> Int {
            try b.requestConvolutionPrograms(g, passes: passes, epilogue: epilogue, outputChannels: outputChannels, residual: residual)
        }
        public func run(on b: ReferenceBackend) throws -> Int { 0 }
    }

    /// Makes ready a pooling's forward pass and, with `backward`, its backward pass.
    public struct PreparePooling: DeviceOp {
        public let g: PoolGeometry, backward: Bool
        public static var kind: BackendCall.Kind { .preparePooling }
        public func run(on b: CPUBackend) throws -> Int { try b.preparePooling(g, backward: backward) }
        public func run(on b: OpenCLBackend) throws -> Int { b.requestPrograms(families: [.pooling]) }
        public func run(on b: ReferenceBackend) throws -> Int { 0 }
    }

    /// Makes ready an inner product's `passes`.
    public struct PrepareInnerProduct: DeviceOp {
        public let g: InnerProductGeometry, passes: PreparedPasses
        public static var kind: BackendCall.Kind { .prepareInnerProduct }
        public var detail: String { g.callDetail }
        public func run(on b: CPUBackend) throws -> Int { try b.prepareInnerProduct(g, passes: passes) }
        public func run(on b: OpenCLBackend) throws -> Int { try b.requestInnerProductPrograms(g, passes: passes) }
        public func run(on b: ReferenceBackend) throws -> Int { 0 }
    }

    /// Makes ready the shape-independent code of `families` (OpenCL: their programs).
    public struct PrepareKernels: DeviceOp {
        public let families: [KernelFamily]
        public static var kind: BackendCall.Kind { .prepareKernels }
        public var detail: String { families.map(\.rawValue).joined(separator: ",") }
        public func run(on b: CPUBackend) throws -> Int { 0 }
        public func run(on b: OpenCLBackend) throws -> Int { b.requestPrograms(families: families) }
        public func run(on b: ReferenceBackend) throws -> Int { 0 }
    }

    /// Makes what the preparations before it asked for and did not make at once (OpenCL: builds the
    /// programs asked for, several at once); returns how many it made.
    public struct FinishPreparation: DeviceOp {
        public static var kind: BackendCall.Kind { .finishPreparation }
        public func run(on b: CPUBackend) throws -> Int { 0 }
        public func run(on b: OpenCLBackend) throws -> Int { try b.buildRequestedPrograms() }
        public func run(on b: ReferenceBackend) throws -> Int { 0 }
    }
}

/// The preparation ops as `Backend` methods; each returns the objects it made.
public extension Backend {
    @discardableResult
    func prepareConvolution(_ g: ConvGeometry, passes: PreparedPasses, epilogue: Activation? = nil,
                            outputChannels: Int? = nil, residual: Bool = false) throws -> Int {
        var op = DeviceOps.PrepareConvolution(g: g, passes: passes, epilogue: epilogue, outputChannels: outputChannels ?? g.outChannels)
        op.residual = residual
        return try run(op)
    }
    @discardableResult
    func preparePooling(_ g: PoolGeometry, backward: Bool) throws -> Int {
        try run(DeviceOps.PreparePooling(g: g, backward: backward))
    }
    @discardableResult
    func prepareInnerProduct(_ g: InnerProductGeometry, passes: PreparedPasses) throws -> Int {
        try run(DeviceOps.PrepareInnerProduct(g: g, passes: passes))
    }
    @discardableResult
    func prepareKernels(_ families: [KernelFamily]) throws -> Int {
        try run(DeviceOps.PrepareKernels(families: families))
    }
    @discardableResult
    func finishPreparation() throws -> Int {
        try run(DeviceOps.FinishPreparation())
    }
}
