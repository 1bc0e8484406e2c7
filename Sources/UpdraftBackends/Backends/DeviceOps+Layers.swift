import UpdraftCore

// The element-wise and data-movement ops — activations, pooling, concat along channels, the strided
// copy, the frozen per-channel affine and element-wise arithmetic — and the `Backend` methods that
// run them. CPU: CPUBackend+Activation/+Pooling/+Concat/+Layout/+Elementwise…; OpenCL: the
// OpenCLBackend+ files of the same names; reference: ReferenceBackend.swift (+Layout).

public extension BackendCall.Kind {
    static let activationForward = Self("activationForward"), activationBackward = Self("activationBackward")
    static let poolingForward = Self("poolingForward"), poolingHalfForward = Self("poolingHalfForward")
    static let poolingBackward = Self("poolingBackward")
    static let concatForward = Self("concatForward"), concatBackward = Self("concatBackward")
    static let stridedCopy = Self("stridedCopy")
    static let channelAffine = Self("channelAffine"), channelAffineBackward = Self("channelAffineBackward")
    static let elementwise = Self("elementwise")
}

extension PoolGeometry {
    /// "max 3x3/2 64ch at 55x55": the detail wrappers show.
    public var callDetail: String { "\(kind) \(kernelH)x\(kernelW)/\(strideH) \(channels)ch at \(inHeight)x\(inWidth)" }
}

extension DeviceOps {
    /// y = f(x) over x, y [N, C, S] (`g.count` elements; per-channel constants by channel).
    public struct ActivationForward: SharedDeviceOp {
        public let a: Activation, g: ActivationGeometry, input: DeviceBuffer, output: DeviceBuffer
        public static var kind: BackendCall.Kind { .activationForward }
        public var detail: String { "\(a)" }
        public func perform<B: DeviceImplementations>(on b: B) throws { try b.activationForward(a, g, input: input, output: output) }
    }

    /// dx = dy * f'(·), reading y (and not x) when `a.backwardReadsOutput`, else x.
    public struct ActivationBackward: SharedDeviceOp {
        public let a: Activation, g: ActivationGeometry, input: DeviceBuffer, output: DeviceBuffer
        public let outputGradient: DeviceBuffer, inputGradient: DeviceBuffer
        public static var kind: BackendCall.Kind { .activationBackward }
        public var detail: String { "\(a)" }
        public func perform<B: DeviceImplementations>(on b: B) throws {
            try b.activationBackward(a, g, input: input, output: output, outputGradient: outputGradient, inputGradient: inputGradient)
        }
    }

    /// Pooling — x [N, C, H, W], y [N, C, Ho, Wo].
    public struct PoolingForward: SharedDeviceOp {
        public let g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer
        public static var kind: BackendCall.Kind { .poolingForward }
        public var detail: String { g.callDetail }
        public func perform<B: DeviceImplementations>(on b: B) throws { try b.poolingForward(g, input: input, output: output) }
    }

    /// `PoolingForward` with half input and/or output, like `ConvolutionHalfForward`: false, having done
    /// nothing, where the backend has no half kernel (only OpenCL has one).
    public struct PoolingHalfForward: HalfStoredOp {
        public let pooling: PoolingForward, storage: HalfStorage
        public static var kind: BackendCall.Kind { .poolingHalfForward }
        public var detail: String { pooling.g.callDetail }
        public var floatOp: PoolingForward { pooling }
        public func run(on b: OpenCLBackend) throws -> Bool {
            try b.poolingForward(pooling.g, input: pooling.input, output: pooling.output, storage: storage)
        }
    }

    /// dx of pooling from x, y and dy.
    public struct PoolingBackward: SharedDeviceOp {
        public let g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer, outputGradient: DeviceBuffer
        public let inputGradient: DeviceBuffer
        public static var kind: BackendCall.Kind { .poolingBackward }
        public var detail: String { g.callDetail }
        public func perform<B: DeviceImplementations>(on b: B) throws {
            try b.poolingBackward(g, input: input, output: output, outputGradient: outputGradient, inputGradient: inputGradient)
        }
    }

    /// Concat along channels — input i is [N, channels[i], S], output [N, sum(channels), S], S = H*W.
    public struct ConcatForward: SharedDeviceOp {
        public let inputs: [DeviceBuffer], channels: [Int], batch: Int, spatial: Int, output: DeviceBuffer
        public static var kind: BackendCall.Kind { .concatForward }
        public func perform<B: DeviceImplementations>(on b: B) throws {
            try b.concatForward(inputs, channels: channels, batch: batch, spatial: spatial, output: output)
        }
    }

    /// Splits dy back into the inputs' gradients.
    public struct ConcatBackward: SharedDeviceOp {
        public let outputGradient: DeviceBuffer, channels: [Int], batch: Int, spatial: Int, inputGradients: [DeviceBuffer]
        public static var kind: BackendCall.Kind { .concatBackward }
        public func perform<B: DeviceImplementations>(on b: B) throws {
            try b.concatBackward(outputGradient, channels: channels, batch: batch, spatial: spatial, inputGradients: inputGradients)
        }
    }

    /// The strided copy (Ops/Layout.swift): the box `g.dims` from its view of `source` into its view of
    /// `destination`, the rest of `destination` untouched. The layout ops that move values (transpose,
    /// concatND, …) run as these (`layoutForward` / `layoutBackward`, Backend+Layout.swift).
    public struct StridedCopyOp: SharedDeviceOp {
        public let g: StridedCopy, source: DeviceBuffer, destination: DeviceBuffer
        public static var kind: BackendCall.Kind { .stridedCopy }
        public var detail: String { "\(g.dims)" }
        public func perform<B: DeviceImplementations>(on b: B) throws { try b.stridedCopy(g, from: source, to: destination) }
    }

    /// y[n, c, s] = scale[c] * x[n, c, s] + shift[c]: batchnorm with frozen statistics.
    public struct ChannelAffine: SharedDeviceOp {
        public let shape: Shape, input: DeviceBuffer, scale: DeviceBuffer, shift: DeviceBuffer, output: DeviceBuffer
        public static var kind: BackendCall.Kind { .channelAffine }
        public func perform<B: DeviceImplementations>(on b: B) throws { try b.channelAffine(shape, input: input, scale: scale, shift: shift, output: output) }
    }

    /// dx[n, c, s] = scale[c] * dy[n, c, s].
    public struct ChannelAffineBackward: SharedDeviceOp {
        public let shape: Shape, outputGradient: DeviceBuffer, scale: DeviceBuffer, inputGradient: DeviceBuffer
        public static var kind: BackendCall.Kind { .channelAffineBackward }
        public func perform<B: DeviceImplementations>(on b: B) throws {
            try b.channelAffineBackward(shape, outputGradient: outputGradient, scale: scale, inputGradient: inputGradient)
        }
    }

    /// y = a + b or a * b over `count` elements.
    public struct Elementwise: DeviceOp {
        public let op: ElementwiseOp, a: DeviceBuffer, b: DeviceBuffer, output: DeviceBuffer, count: Int
        public static var kind: BackendCall.Kind { .elementwise }
        public var detail: String { "\(op)" }
        public func run(on backend: CPUBackend) throws { try backend.elementwise(op, a, b, output: output, count: count) }
        public func run(on backend: OpenCLBackend) throws { try backend.elementwise(op, a, b, output: output, count: count) }
        public func run(on backend: ReferenceBackend) throws { try backend.elementwise(op, a, b, output: output, count: count) }
    }
}

/// These ops as `Backend` methods (each builds its op and `run`s it).
public extension Backend {
    func activationForward(_ a: Activation, _ g: ActivationGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try run(DeviceOps.ActivationForward(a: a, g: g, input: input, output: output))
    }
    func activationBackward(_ a: Activation, _ g: ActivationGeometry, input: DeviceBuffer, output: DeviceBuffer,
                            outputGradient: DeviceBuffer, inputGradient: DeviceBuffer) throws {
        try run(DeviceOps.ActivationBackward(a: a, g: g, input: input, output: output, outputGradient: outputGradient,
                                             inputGradient: inputGradient))
    }
    func poolingForward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try run(DeviceOps.PoolingForward(g: g, input: input, output: output))
    }
    func poolingForward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer, storage: HalfStorage) throws -> Bool {
        try run(DeviceOps.PoolingHalfForward(pooling: DeviceOps.PoolingForward(g: g, input: input, output: output), storage: storage))
    }
    func poolingBackward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer,
                         outputGradient: DeviceBuffer, inputGradient: DeviceBuffer) throws {
        try run(DeviceOps.PoolingBackward(g: g, input: input, output: output, outputGradient: outputGradient,
                                          inputGradient: inputGradient))
    }
    func concatForward(_ inputs: [DeviceBuffer], channels: [Int], batch: Int, spatial: Int, output: DeviceBuffer) throws {
        try run(DeviceOps.ConcatForward(inputs: inputs, channels: channels, batch: batch, spatial: spatial, output: output))
    }
    func concatBackward(_ outputGradient: DeviceBuffer, channels: [Int], batch: Int, spatial: Int,
                        inputGradients: [DeviceBuffer]) throws {
        try run(DeviceOps.ConcatBackward(outputGradient: outputGradient, channels: channels, batch: batch, spatial: spatial,
                                         inputGradients: inputGradients))
    }
    func stridedCopy(_ g: StridedCopy, from source: DeviceBuffer, to destination: DeviceBuffer) throws {
        try run(DeviceOps.StridedCopyOp(g: g, source: source, destination: destination))
    }
    func channelAffine(_ shape: Shape, input: DeviceBuffer, scale: DeviceBuffer, shift: DeviceBuffer,
                       output: DeviceBuffer) throws {
        try run(DeviceOps.ChannelAffine(shape: shape, input: input, scale: scale, shift: shift, output: output))
    }
    func channelAffineBackward(_ shape: Shape, outputGradient: DeviceBuffer, scale: DeviceBuffer,
                               inputGradient: DeviceBuffer) throws {
        try run(DeviceOps.ChannelAffineBackward(shape: shape, outputGradient: outputGradient, scale: scale,
                                                inputGradient: inputGradient))
    }
    func elementwise(_ op: ElementwiseOp, _ a: DeviceBuffer, _ b: DeviceBuffer, output: DeviceBuffer, count: Int) throws {
        try run(DeviceOps.Elementwise(op: op, a: a, b: b, output: output, count: count))
    }
}

/// The layer ops' implementations every kind of backend spells the same way (`SharedDeviceOp.perform`).
public protocol LayerImplementations: AnyObject {
    func activationForward(_ a: Activation, _ g: ActivationGeometry, input: DeviceBuffer, output: DeviceBuffer) throws
    func activationBackward(_ a: Activation, _ g: ActivationGeometry, input: DeviceBuffer, output: DeviceBuffer,
                            outputGradient: DeviceBuffer, inputGradient: DeviceBuffer) throws
    func poolingForward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer) throws
    func poolingBackward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer,
                         outputGradient: DeviceBuffer, inputGradient: DeviceBuffer) throws
    func concatForward(_ inputs: [DeviceBuffer], channels: [Int], batch: Int, spatial: Int, output: DeviceBuffer) throws
    func concatBackward(_ outputGradient: DeviceBuffer, channels: [Int], batch: Int, spatial: Int,
                        inputGradients: [DeviceBuffer]) throws
    func stridedCopy(_ g: StridedCopy, from source: DeviceBuffer, to destination: DeviceBuffer) throws
    func channelAffine(_ shape: Shape, input: DeviceBuffer, scale: DeviceBuffer, shift: DeviceBuffer, output: DeviceBuffer) throws
    func channelAffineBackward(_ shape: Shape, outputGradient: DeviceBuffer, scale: DeviceBuffer,
                               inputGradient: DeviceBuffer) throws
}
