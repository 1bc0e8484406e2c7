import UpdraftCore

// The optimizers' update steps, one fused pass over a parameter tensor and its state, and the
// `Backend` methods that run them: SGD's and Adam's own kernels (CPU: CPUBackend+Optimizers.swift and
// CUpdraftKernels; OpenCL: OpenCLBackend+Optimizers.swift, Kernels/optimizers.cl; reference:
// ReferenceBackend.swift), and `ElementwiseStep`, which runs an `ElementwiseUpdate` an optimizer writes
// in its own file (its Double definition, float loop and OpenCL C statements), so that a new
// optimizer needs no kernel file, backend method or op of its own.

public extension BackendCall.Kind {
    static let sgdStep = Self("sgdStep"), adamStep = Self("adamStep"), elementwiseStep = Self("elementwiseStep")
}

/// One element's update, written once per kind of backend in the optimizer's own file: the parameter
/// `p` moves using its gradient `g`, the state it keeps per element and the step's scalars.
public struct ElementwiseUpdate: Sendable {
    /// The update's name, for messages and the OpenCL program's name ("adamw").
    public var name: String
    /// The state arrays kept per element, in order; the OpenCL statements use these names (Adam: m, v).
    public var state: [String]
    /// The scalars a step passes, in order; the OpenCL statements use these names.
    public var scalars: [String]
    /// The definition, in Double over whole arrays: parameter, gradient, state (in `state`'s order),
    /// scalars (in `scalars`' order). The reference backend runs it; the others are checked against it.
    public var reference: @Sendable (_ p: inout [Double], _ g: [Double], _ state: inout [[Double]], _ k: [Double]) -> Void
    /// The float loop over `count` elements from the given addresses (one thread's share).
    public var cpu: @Sendable (_ p: UnsafeMutablePointer<Float>, _ g: UnsafePointer<Float>, _ state: [UnsafeMutablePointer<Float>],
                               _ count: Int, _ k: [Float]) -> Void
    /// OpenCL C statements that update `p` (float) from `g` (const float), each state variable and the
    /// scalars, all by their names; the kernel around them loads and stores one element per work-item.
    public var openCL: String

    public init(name: String, state: [String], scalars: [String],
                reference: @escaping @Sendable (_ p: inout [Double], _ g: [Double], _ state: inout [[Double]], _ k: [Double]) -> Void,
                cpu: @escaping @Sendable (_ p: UnsafeMutablePointer<Float>, _ g: UnsafePointer<Float>,
                                          _ state: [UnsafeMutablePointer<Float>], _ count: Int, _ k: [Float]) -> Void,
                openCL: String) {
        self.name = name; self.state = state; self.scalars = scalars
        self.reference = reference; self.cpu = cpu; self.openCL = openCL
    }
}

extension DeviceOps {
    /// SGD with momentum, one fused pass over a parameter tensor (`SGDHyperparameters`).
    public struct SGDStep: SharedDeviceOp {
        public let h: SGDHyperparameters, parameter: DeviceBuffer, gradient: DeviceBuffer, velocity: DeviceBuffer, count: Int
        public static var kind: BackendCall.Kind { .sgdStep }
        public func perform<B: DeviceImplementations>(on b: B) throws {
            try b.sgdStep(h, parameter: parameter, gradient: gradient, velocity: velocity, count: count)
        }
    }

    /// Adam, one fused pass; `step` counts from 1 (bias correction uses beta^step).
    public struct AdamStep: SharedDeviceOp {
        public let h: AdamHyperparameters, step: Int, parameter: DeviceBuffer, gradient: DeviceBuffer
        public let m: DeviceBuffer, v: DeviceBuffer, count: Int
        public static var kind: BackendCall.Kind { .adamStep }
        public func perform<B: DeviceImplementations>(on b: B) throws {
            try b.adamStep(h, step: step, parameter: parameter, gradient: gradient, m: m, v: v, count: count)
        }
    }

    /// An optimizer's `ElementwiseUpdate` over one parameter tensor of `count` values, its state
    /// buffers in `update.state`'s order and its scalars in `update.scalars`' order.
    public struct ElementwiseStep: SharedDeviceOp {
        public let update: ElementwiseUpdate, parameter: DeviceBuffer, gradient: DeviceBuffer, state: [DeviceBuffer]
        public let scalars: [Double], count: Int
        public static var kind: BackendCall.Kind { .elementwiseStep }
        public var detail: String { update.name }
        public func perform<B: DeviceImplementations>(on b: B) throws {
            try b.elementwiseStep(update, parameter: parameter, gradient: gradient, state: state, scalars: scalars, count: count)
        }
    }
}

/// These ops as `Backend` methods (each builds its op and `run`s it).
public extension Backend {
    func sgdStep(_ h: SGDHyperparameters, parameter: DeviceBuffer, gradient: DeviceBuffer,
                 velocity: DeviceBuffer, count: Int) throws {
        try run(DeviceOps.SGDStep(h: h, parameter: parameter, gradient: gradient, velocity: velocity, count: count))
    }
    func adamStep(_ h: AdamHyperparameters, step: Int, parameter: DeviceBuffer, gradient: DeviceBuffer,
                  m: DeviceBuffer, v: DeviceBuffer, count: Int) throws {
        try run(DeviceOps.AdamStep(h: h, step: step, parameter: parameter, gradient: gradient, m: m, v: v, count: count))
    }
    func elementwiseStep(_ update: ElementwiseUpdate, parameter: DeviceBuffer, gradient: DeviceBuffer, state: [DeviceBuffer],
                         scalars: [Double], count: Int) throws {
        guard state.count == update.state.count, scalars.count == update.scalars.count else {
            throw UpdraftError(.invalidArgument, "\(update.name) takes \(update.state.count) state buffers and \(update.scalars.count) scalars, "
                               + "was given \(state.count) and \(scalars.count)")
        }
        try run(DeviceOps.ElementwiseStep(update: update, parameter: parameter, gradient: gradient, state: state, scalars: scalars,
                                          count: count))
    }
}

/// The optimizer steps' implementations every kind of backend spells the same way (`SharedDeviceOp.perform`).
public protocol OptimizerImplementations: AnyObject {
    func sgdStep(_ h: SGDHyperparameters, parameter: DeviceBuffer, gradient: DeviceBuffer,
                 velocity: DeviceBuffer, count: Int) throws
    func adamStep(_ h: AdamHyperparameters, step: Int, parameter: DeviceBuffer, gradient: DeviceBuffer,
                  m: DeviceBuffer, v: DeviceBuffer, count: Int) throws
    func elementwiseStep(_ update: ElementwiseUpdate, parameter: DeviceBuffer, gradient: DeviceBuffer,
                         state: [DeviceBuffer], scalars: [Double], count: Int) throws
}
