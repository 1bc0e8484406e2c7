import UpdraftCore

/// One piece of work a device runs, as a value: the op's arguments, what wrappers count it by, and
/// the implementation each kind of backend dispatches it to — the fast CPU path, the OpenCL kernels
/// and the Double reference side by side, as MLX's `Primitive` keeps `eval_cpu` and `eval_gpu`
/// together. `Backend.run(_:)` is the one requirement every op goes through, so a wrapper that
/// measures, fails or forwards calls intercepts every op in one place, with no per-op code.
///
/// The ops are `DeviceOps`' nested types, one file per family (`DeviceOps+Convolution.swift`, …),
/// each with the `Backend` methods that build it (`backend.convolutionForward(…)` is
/// `backend.run(DeviceOps.ConvolutionForward(…))`). A new op is one type there with its `BackendCall.Kind`
/// and, where every backend makes the same call, one `perform(on:)` (`SharedDeviceOp`), else its three
/// `run(on:)`s; a new kind of backend adds one `run(on:)` to `SharedDeviceOp` and to each op that has three.
public protocol DeviceOp {
    /// What the op returns (most return nothing; the half-storage forms say whether they ran).
    associatedtype Result
    /// The key wrappers count and time the op by.
    static var kind: BackendCall.Kind { get }
    /// The op's shape for tables ("16->32 3x3/2 at 28x28", "relu", …); empty when it has none to show.
    var detail: String { get }
    /// Runs on the fast CPU path.
    func run(on backend: CPUBackend) throws -> Result
    /// Runs on an OpenCL device.
    func run(on backend: OpenCLBackend) throws -> Result
    /// Runs the Double reference (the definition the other two are checked against).
    func run(on backend: ReferenceBackend) throws -> Result
}

public extension DeviceOp {
    var detail: String { "" }
}

/// A forward op with half-precision storage (`HalfStorage`): only OpenCL has such kernels; the CPU and
/// the reference answer false (the executor then converts around the float op), or run the float op
/// when nothing is half.
public protocol HalfStoredOp: DeviceOp where Result == Bool {
    associatedtype FloatOp: DeviceOp where FloatOp.Result == Void
    /// The same op on floats.
    var floatOp: FloatOp { get }
    var storage: HalfStorage { get }
}

public extension HalfStoredOp {
    func run(on b: CPUBackend) throws -> Bool { try floatsOnly(b) }
    func run(on b: ReferenceBackend) throws -> Bool { try floatsOnly(b) }
    /// Without a half kernel: the float op when nothing is half, else false.
    private func floatsOnly(_ b: Backend) throws -> Bool {
        guard storage == .none else { return false }
        try b.run(floatOp)
        return true
    }
}

/// An op whose implementation is the same call on every kind of backend (most are): it writes that
/// call once, as `perform(on:)`, over what the three kinds implement under one spelling
/// (`DeviceImplementations`: each family's protocol, next to its ops); the three `run(on:)`s follow.
/// An op whose backends differ (a half-storage kernel only OpenCL has, preparation) writes its three.
public protocol SharedDeviceOp: DeviceOp {
    associatedtype Result = Void
    /// Runs on any kind of backend, through the implementation they share.
    func perform<B: DeviceImplementations>(on b: B) throws -> Result
}

public extension SharedDeviceOp {
    func run(on b: CPUBackend) throws -> Result { try perform(on: b) }
    func run(on b: OpenCLBackend) throws -> Result { try perform(on: b) }
    func run(on b: ReferenceBackend) throws -> Result { try perform(on: b) }
}

/// What the three kinds of backend implement under one spelling, family by family.
public typealias DeviceImplementations = ConvolutionImplementations & LayerImplementations & LossImplementations
    & OptimizerImplementations

extension CPUBackend: DeviceImplementations {}
extension OpenCLBackend: DeviceImplementations {}
extension ReferenceBackend: DeviceImplementations {}

/// The namespace of the device ops (see `DeviceOp`).
public enum DeviceOps {}

/// One call a wrapper sees (`ForwardingBackend.intercept`): which op or memory requirement, and a
/// short description of its shape, built only when asked for.
public struct BackendCall {
    /// A call's key: the name of a memory requirement of `Backend` (`makeBuffer`, `upload`, …) or of a
    /// device op (`DeviceOp.kind`: `convolutionForward`, `sgdStep`, …). Each op declares its own next
    /// to its type, so a new op needs no edit here.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        /// The name, as tables and the bench's timings print it.
        public let rawValue: String
        public init(_ name: String) { rawValue = name }
        public var description: String { rawValue }
    }

    /// Which requirement or op was called; the key wrappers count and time calls by.
    public let kind: Kind
    private let makeDetail: () -> String

    init(_ kind: Kind, _ detail: @escaping () -> String = { "" }) { self.kind = kind; self.makeDetail = detail }

    /// The op's shape ("16->32 3x3/2 at 28x28", "relu", ...), empty for memory calls.
    public var detail: String { makeDetail() }
}

/// The memory and transfer requirements of `Backend`, by the names of the requirements.
public extension BackendCall.Kind {
    static let makeBuffer = Self("makeBuffer"), upload = Self("upload"), download = Self("download")
    static let downloadLater = Self("downloadLater"), fill = Self("fill"), copy = Self("copy")
    static let accumulate = Self("accumulate"), synchronize = Self("synchronize")
    /// A batch of 8-bit image samples converted to the float input on the backend: `Backend.uploadPixels`.
    static let uploadPixels = Self("uploadPixels")
    /// Partial transfers and row copies (`copyHalfRows`: the half-precision form of `copyRows`).
    static let uploadRange = Self("uploadRange"), downloadRange = Self("downloadRange")
    static let copyRows = Self("copyRows"), copyHalfRows = Self("copyHalfRows")
}

// Each backend kind dispatches an op to its own implementation.
extension CPUBackend {
    /// Runs `op` on the CPU path (`DeviceOp.run(on:)`).
    public func run<Op: DeviceOp>(_ op: Op) throws -> Op.Result { try op.run(on: self) }
}

extension OpenCLBackend {
    /// Runs `op`'s kernels on this device (`DeviceOp.run(on:)`).
    public func run<Op: DeviceOp>(_ op: Op) throws -> Op.Result { try op.run(on: self) }
}

extension ReferenceBackend {
    /// Runs `op`'s Double reference (`DeviceOp.run(on:)`).
    public func run<Op: DeviceOp>(_ op: Op) throws -> Op.Result { try op.run(on: self) }
}
