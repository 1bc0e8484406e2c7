import UpdraftCore

/// One call a `ForwardingBackend` passes on: which requirement, and (for the ops) a short description
/// of its shape, built only when asked for.
public struct BackendCall {
    /// Every requirement of `Backend` that does work (the properties are forwarded without a call).
    public enum Kind: String, CaseIterable, Sendable {
        /// Buffer management and synchronization: the `Backend` requirements of the same names.
        case makeBuffer, upload, download, downloadLater, fill, copy, accumulate, synchronize
        /// A batch of 8-bit image samples converted to the float input on the backend: `Backend.uploadPixels`.
        case uploadPixels
        /// Partial transfers and row copies: the `Backend` requirements of the same names.
        case uploadRange, downloadRange, copyRows, copyHalfRows
        /// Convolution forward (whole, or one slice of the batch) and its two backward passes.
        case convolutionForward, convolutionSliceForward, convolutionBackwardData, convolutionBackwardWeights
        /// Inner product forward and its two backward passes.
        case innerProductForward, innerProductBackwardData, innerProductBackwardWeights
        /// Activation, pooling and concatenation, forward and backward.
        case activationForward, activationBackward, poolingForward, poolingBackward, concatForward, concatBackward
        /// Convolution (slice form) and pooling forward with half-precision activations (`HalfStorage`).
        case convolutionHalfForward, poolingHalfForward
        /// The strided copy (the layout ops that move values), softmax forward and backward, and the two losses.
        case stridedCopy, softmaxForward, softmaxBackward, softmaxCrossEntropy, meanSquaredError
        /// Per-channel scale and shift (and its gradient), element-wise arithmetic, and the spatial ops (padding, upsampling, LRN, L2 normalization) forward and backward.
        case channelAffine, channelAffineBackward, elementwise, spatialForward, spatialBackward
        /// Broadcasting arithmetic, reductions and their gradient, and the SGD and Adam update steps.
        case broadcastBinary, reduce, reduceBackward, sgdStep, adamStep
    }

    /// Which `Backend` requirement was called; the key wrappers count and time calls by.
    public let kind: Kind
    private let makeDetail: () -> String

    init(_ kind: Kind, _ detail: @escaping () -> String = { "" }) { self.kind = kind; self.makeDetail = detail }

    /// The op's shape ("16->32 3x3/2 at 28x28", "relu", ...), empty for memory calls.
    public var detail: String { makeDetail() }
}

/// A `Backend` that passes every call to `inner` through one hook, `intercept(_:_:)`: the base of
/// wrappers that count, time or fail calls (the benchmark's measuring backend, the tests' failure
/// injection). It implements every requirement explicitly, defaulted ones included, so a wrapper
/// cannot miss one and quietly take a default path production never takes; a requirement added
/// to `Backend` must be added here, with its `BackendCall.Kind`.
open class ForwardingBackend: Backend {
    /// The backend that does the work; every call and property is passed on to it.
    public let inner: Backend

    /// Wraps `inner`; the wrapper reports `inner`'s name, memory and capabilities as its own.
    public init(_ inner: Backend) { self.inner = inner }

    /// Runs one call. Subclasses count, time or fail calls here, then call `body` (or not).
    open func intercept<T>(_ call: BackendCall, _ body: () throws -> T) throws -> T { try body() }

    /// `inner`'s name, unchanged (not intercepted).
    open var name: String { inner.name }
    /// `inner`'s memory, unchanged (not intercepted).
    open var memory: BackendMemory { inner.memory }
    /// `inner`'s value, unchanged (not intercepted).
    open var runsOnHostCPU: Bool { inner.runsOnHostCPU }
    /// `inner`'s value, unchanged (not intercepted).
    open var writesConvolutionSlices: Bool { inner.writesConvolutionSlices }

    // MARK: Memory
    /// Passes `Backend.makeBuffer` to `inner` through `intercept(_:_:)` as `.makeBuffer` with its shape as `detail`.
    open func makeBuffer(count: Int) throws -> DeviceBuffer {
        try intercept(BackendCall(.makeBuffer, { "\(count)" })) { try inner.makeBuffer(count: count) }
    }
    /// Passes `Backend.upload` to `inner` through `intercept(_:_:)` as `.upload`.
    open func upload(_ values: [Float], to buffer: DeviceBuffer) throws {
        try intercept(BackendCall(.upload)) { try inner.upload(values, to: buffer) }
    }
    /// Passes `Backend.download` to `inner` through `intercept(_:_:)` as `.download`.
    open func download(_ buffer: DeviceBuffer) throws -> [Float] {
        try intercept(BackendCall(.download)) { try inner.download(buffer) }
    }
    /// Passes `Backend.downloadLater` to `inner` through `intercept(_:_:)` as `.downloadLater`.
    open func downloadLater(_ buffer: DeviceBuffer) throws -> PendingDownload {
        try intercept(BackendCall(.downloadLater)) { try inner.downloadLater(buffer) }
    }
    /// Passes `Backend.fill` to `inner` through `intercept(_:_:)` as `.fill`.
    open func fill(_ buffer: DeviceBuffer, with value: Float) throws {
        try intercept(BackendCall(.fill)) { try inner.fill(buffer, with: value) }
    }
    /// Passes `Backend.copy` to `inner` through `intercept(_:_:)` as `.copy`.
    open func copy(_ source: DeviceBuffer, to destination: DeviceBuffer) throws {
        try intercept(BackendCall(.copy)) { try inner.copy(source, to: destination) }
    }
    /// Passes `Backend.accumulate` to `inner` through `intercept(_:_:)` as `.accumulate`.
    open func accumulate(_ source: DeviceBuffer, into destination: DeviceBuffer) throws {
        try intercept(BackendCall(.accumulate)) { try inner.accumulate(source, into: destination) }
    }
    /// Passes `Backend.synchronize` to `inner` through `intercept(_:_:)` as `.synchronize`.
    open func synchronize() throws { try intercept(BackendCall(.synchronize)) { try inner.synchronize() } }

    // MARK: Ranges and rows
    /// Passes `Backend.uploadPixels` to `inner` through `intercept(_:_:)` as `.uploadPixels` with its shape as `detail`.
    open func uploadPixels(_ pixels: UnsafeBufferPointer<UInt8>, shape: Shape, scale: DeviceBuffer?, shift: DeviceBuffer?,
                           to output: DeviceBuffer) throws {
        try intercept(BackendCall(.uploadPixels, { "\(shape)" })) {
            try inner.uploadPixels(pixels, shape: shape, scale: scale, shift: shift, to: output)
        }
    }
    /// Passes `Backend.upload` to `inner` through `intercept(_:_:)` as `.uploadRange`.
    open func upload(_ values: [Float], to buffer: DeviceBuffer, offset: Int) throws {
        try intercept(BackendCall(.uploadRange)) { try inner.upload(values, to: buffer, offset: offset) }
    }
    /// Passes `Backend.download` to `inner` through `intercept(_:_:)` as `.downloadRange`.
    open func download(_ buffer: DeviceBuffer, offset: Int, count: Int) throws -> [Float] {
        try intercept(BackendCall(.downloadRange)) { try inner.download(buffer, offset: offset, count: count) }
    }
    /// Passes `Backend.copyRows` to `inner` through `intercept(_:_:)` as `.copyRows`.
    open func copyRows(_ source: DeviceBuffer, rows sourceRows: [Int], to destination: DeviceBuffer,
                       rows destinationRows: [Int], rowLength: Int) throws {
        try intercept(BackendCall(.copyRows)) {
            try inner.copyRows(source, rows: sourceRows, to: destination, rows: destinationRows, rowLength: rowLength)
        }
    }
    /// Passes `Backend.copyRows` to `inner` through `intercept(_:_:)` as `.copyHalfRows`.
    open func copyRows(_ source: DeviceBuffer, rows sourceRows: [Int], to destination: DeviceBuffer,
                       rows destinationRows: [Int], rowLength: Int, toHalf: Bool) throws {
        try intercept(BackendCall(.copyHalfRows)) {
            try inner.copyRows(source, rows: sourceRows, to: destination, rows: destinationRows, rowLength: rowLength, toHalf: toHalf)
        }
    }

    // MARK: Convolution and inner product
    /// Passes `Backend.convolutionForward` to `inner` through `intercept(_:_:)` as `.convolutionForward` with its shape as `detail`.
    open func convolutionForward(_ g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?,
                                 output: DeviceBuffer, epilogue: Activation?) throws {
        try intercept(BackendCall(.convolutionForward, { Self.describe(g) })) {
            try inner.convolutionForward(g, input: input, weights: weights, bias: bias, output: output, epilogue: epilogue)
        }
    }
    /// Passes `Backend.convolutionForward` to `inner` through `intercept(_:_:)` as `.convolutionSliceForward` with its shape as `detail`.
    open func convolutionForward(_ g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?,
                                 output: DeviceBuffer, channelOffset: Int, outputChannels: Int, epilogue: Activation?) throws {
        try intercept(BackendCall(.convolutionSliceForward, { Self.describe(g) })) {
            try inner.convolutionForward(g, input: input, weights: weights, bias: bias, output: output,
                                         channelOffset: channelOffset, outputChannels: outputChannels, epilogue: epilogue)
        }
    }
    /// Passes `Backend.convolutionBackwardData` to `inner` through `intercept(_:_:)` as `.convolutionBackwardData` with its shape as `detail`.
    open func convolutionBackwardData(_ g: ConvGeometry, outputGradient: DeviceBuffer, weights: DeviceBuffer,
                                      inputGradient: DeviceBuffer) throws {
        try intercept(BackendCall(.convolutionBackwardData, { Self.describe(g) })) {
            try inner.convolutionBackwardData(g, outputGradient: outputGradient, weights: weights, inputGradient: inputGradient)
        }
    }
    /// Passes `Backend.convolutionBackwardWeights` to `inner` through `intercept(_:_:)` as `.convolutionBackwardWeights` with its shape as `detail`.
    open func convolutionBackwardWeights(_ g: ConvGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                                         weightGradient: DeviceBuffer, biasGradient: DeviceBuffer?) throws {
        try intercept(BackendCall(.convolutionBackwardWeights, { Self.describe(g) })) {
            try inner.convolutionBackwardWeights(g, input: input, outputGradient: outputGradient,
                                                 weightGradient: weightGradient, biasGradient: biasGradient)
        }
    }
    /// Passes `Backend.innerProductForward` to `inner` through `intercept(_:_:)` as `.innerProductForward` with its shape as `detail`.
    open func innerProductForward(_ g: InnerProductGeometry, input: DeviceBuffer, weights: DeviceBuffer,
                                  bias: DeviceBuffer?, output: DeviceBuffer, epilogue: Activation?) throws {
        try intercept(BackendCall(.innerProductForward, { Self.describe(g) })) {
            try inner.innerProductForward(g, input: input, weights: weights, bias: bias, output: output, epilogue: epilogue)
        }
    }
    /// Passes `Backend.innerProductBackwardData` to `inner` through `intercept(_:_:)` as `.innerProductBackwardData` with its shape as `detail`.
    open func innerProductBackwardData(_ g: InnerProductGeometry, outputGradient: DeviceBuffer, weights: DeviceBuffer,
                                       inputGradient: DeviceBuffer) throws {
        try intercept(BackendCall(.innerProductBackwardData, { Self.describe(g) })) {
            try inner.innerProductBackwardData(g, outputGradient: outputGradient, weights: weights, inputGradient: inputGradient)
        }
    }
    /// Passes `Backend.innerProductBackwardWeights` to `inner` through `intercept(_:_:)` as `.innerProductBackwardWeights` with its shape as `detail`.
    open func innerProductBackwardWeights(_ g: InnerProductGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                                          weightGradient: DeviceBuffer, biasGradient: DeviceBuffer?) throws {
        try intercept(BackendCall(.innerProductBackwardWeights, { Self.describe(g) })) {
            try inner.innerProductBackwardWeights(g, input: input, outputGradient: outputGradient,
                                                  weightGradient: weightGradient, biasGradient: biasGradient)
        }
    }

    // MARK: Element-wise, pooling, concat, layout
    /// Passes `Backend.activationForward` to `inner` through `intercept(_:_:)` as `.activationForward` with its shape as `detail`.
    open func activationForward(_ a: Activation, _ g: ActivationGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try intercept(BackendCall(.activationForward, { "\(a)" })) { try inner.activationForward(a, g, input: input, output: output) }
    }
    /// Passes `Backend.activationBackward` to `inner` through `intercept(_:_:)` as `.activationBackward` with its shape as `detail`.
    open func activationBackward(_ a: Activation, _ g: ActivationGeometry, input: DeviceBuffer, output: DeviceBuffer,
                                 outputGradient: DeviceBuffer, inputGradient: DeviceBuffer) throws {
        try intercept(BackendCall(.activationBackward, { "\(a)" })) {
            try inner.activationBackward(a, g, input: input, output: output, outputGradient: outputGradient, inputGradient: inputGradient)
        }
    }
    /// Passes `Backend.poolingForward` to `inner` through `intercept(_:_:)` as `.poolingForward` with its shape as `detail`.
    open func poolingForward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try intercept(BackendCall(.poolingForward, { Self.describe(g) })) { try inner.poolingForward(g, input: input, output: output) }
    }
    /// Passes `Backend.poolingForward(_:input:output:storage:)` to `inner` through `intercept(_:_:)` as `.poolingHalfForward`.
    open func poolingForward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer, storage: HalfStorage) throws -> Bool {
        try intercept(BackendCall(.poolingHalfForward, { Self.describe(g) })) {
            try inner.poolingForward(g, input: input, output: output, storage: storage)
        }
    }
    /// Passes `Backend.convolutionForward(…, storage:)` to `inner` through `intercept(_:_:)` as `.convolutionHalfForward`.
    open func convolutionForward(_ g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?,
                                 output: DeviceBuffer, channelOffset: Int, outputChannels: Int, epilogue: Activation?,
                                 storage: HalfStorage) throws -> Bool {
        try intercept(BackendCall(.convolutionHalfForward, { Self.describe(g) })) {
            try inner.convolutionForward(g, input: input, weights: weights, bias: bias, output: output, channelOffset: channelOffset,
                                         outputChannels: outputChannels, epilogue: epilogue, storage: storage)
        }
    }
    /// Passes `Backend.poolingBackward` to `inner` through `intercept(_:_:)` as `.poolingBackward` with its shape as `detail`.
    open func poolingBackward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer,
                              outputGradient: DeviceBuffer, inputGradient: DeviceBuffer) throws {
        try intercept(BackendCall(.poolingBackward, { Self.describe(g) })) {
            try inner.poolingBackward(g, input: input, output: output, outputGradient: outputGradient, inputGradient: inputGradient)
        }
    }
    /// Passes `Backend.concatForward` to `inner` through `intercept(_:_:)` as `.concatForward`.
    open func concatForward(_ inputs: [DeviceBuffer], channels: [Int], batch: Int, spatial: Int, output: DeviceBuffer) throws {
        try intercept(BackendCall(.concatForward)) {
            try inner.concatForward(inputs, channels: channels, batch: batch, spatial: spatial, output: output)
        }
    }
    /// Passes `Backend.concatBackward` to `inner` through `intercept(_:_:)` as `.concatBackward`.
    open func concatBackward(_ outputGradient: DeviceBuffer, channels: [Int], batch: Int, spatial: Int,
                             inputGradients: [DeviceBuffer]) throws {
        try intercept(BackendCall(.concatBackward)) {
            try inner.concatBackward(outputGradient, channels: channels, batch: batch, spatial: spatial, inputGradients: inputGradients)
        }
    }
    /// Passes `Backend.stridedCopy` to `inner` through `intercept(_:_:)` as `.stridedCopy`.
    open func stridedCopy(_ g: StridedCopy, from source: DeviceBuffer, to destination: DeviceBuffer) throws {
        try intercept(BackendCall(.stridedCopy, { "\(g.dims)" })) { try inner.stridedCopy(g, from: source, to: destination) }
    }

    // MARK: Softmax and losses
    /// Passes `Backend.softmaxForward` to `inner` through `intercept(_:_:)` as `.softmaxForward`.
    open func softmaxForward(_ g: SoftmaxGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try intercept(BackendCall(.softmaxForward)) { try inner.softmaxForward(g, input: input, output: output) }
    }
    /// Passes `Backend.softmaxBackward` to `inner` through `intercept(_:_:)` as `.softmaxBackward`.
    open func softmaxBackward(_ g: SoftmaxGeometry, output: DeviceBuffer, outputGradient: DeviceBuffer,
                              inputGradient: DeviceBuffer) throws {
        try intercept(BackendCall(.softmaxBackward)) {
            try inner.softmaxBackward(g, output: output, outputGradient: outputGradient, inputGradient: inputGradient)
        }
    }
    /// Passes `Backend.softmaxCrossEntropy` to `inner` through `intercept(_:_:)` as `.softmaxCrossEntropy`.
    open func softmaxCrossEntropy(_ g: SoftmaxGeometry, logits: DeviceBuffer, labels: DeviceBuffer, loss: DeviceBuffer,
                                  logitsGradient: DeviceBuffer?, correct: DeviceBuffer?) throws {
        try intercept(BackendCall(.softmaxCrossEntropy)) {
            try inner.softmaxCrossEntropy(g, logits: logits, labels: labels, loss: loss, logitsGradient: logitsGradient, correct: correct)
        }
    }
    /// Passes `Backend.meanSquaredError` to `inner` through `intercept(_:_:)` as `.meanSquaredError`.
    open func meanSquaredError(count: Int, input: DeviceBuffer, target: DeviceBuffer, loss: DeviceBuffer,
                               inputGradient: DeviceBuffer?) throws {
        try intercept(BackendCall(.meanSquaredError)) {
            try inner.meanSquaredError(count: count, input: input, target: target, loss: loss, inputGradient: inputGradient)
        }
    }

    // MARK: Frozen layers, element-wise, spatial, broadcasting
    /// Passes `Backend.channelAffine` to `inner` through `intercept(_:_:)` as `.channelAffine`.
    open func channelAffine(_ shape: Shape, input: DeviceBuffer, scale: DeviceBuffer, shift: DeviceBuffer,
                            output: DeviceBuffer) throws {
        try intercept(BackendCall(.channelAffine)) { try inner.channelAffine(shape, input: input, scale: scale, shift: shift, output: output) }
    }
    /// Passes `Backend.channelAffineBackward` to `inner` through `intercept(_:_:)` as `.channelAffineBackward`.
    open func channelAffineBackward(_ shape: Shape, outputGradient: DeviceBuffer, scale: DeviceBuffer,
                                    inputGradient: DeviceBuffer) throws {
        try intercept(BackendCall(.channelAffineBackward)) {
            try inner.channelAffineBackward(shape, outputGradient: outputGradient, scale: scale, inputGradient: inputGradient)
        }
    }
    /// Passes `Backend.elementwise` to `inner` through `intercept(_:_:)` as `.elementwise` with its shape as `detail`.
    open func elementwise(_ op: ElementwiseOp, _ a: DeviceBuffer, _ b: DeviceBuffer, output: DeviceBuffer, count: Int) throws {
        try intercept(BackendCall(.elementwise, { "\(op)" })) { try inner.elementwise(op, a, b, output: output, count: count) }
    }
    /// Passes `Backend.spatialForward` to `inner` through `intercept(_:_:)` as `.spatialForward` with its shape as `detail`.
    open func spatialForward(_ g: SpatialGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try intercept(BackendCall(.spatialForward, { g.op.familyName })) { try inner.spatialForward(g, input: input, output: output) }
    }
    /// Passes `Backend.spatialBackward` to `inner` through `intercept(_:_:)` as `.spatialBackward` with its shape as `detail`.
    open func spatialBackward(_ g: SpatialGeometry, input: DeviceBuffer, output: DeviceBuffer, outputGradient: DeviceBuffer,
                              inputGradient: DeviceBuffer) throws {
        try intercept(BackendCall(.spatialBackward, { g.op.familyName })) {
            try inner.spatialBackward(g, input: input, output: output, outputGradient: outputGradient, inputGradient: inputGradient)
        }
    }
    /// Passes `Backend.broadcastBinary` to `inner` through `intercept(_:_:)` as `.broadcastBinary` with its shape as `detail`.
    open func broadcastBinary(_ g: BroadcastGeometry, _ a: DeviceBuffer, _ b: DeviceBuffer, output: DeviceBuffer) throws {
        try intercept(BackendCall(.broadcastBinary, { g.op.rawValue })) { try inner.broadcastBinary(g, a, b, output: output) }
    }
    /// Passes `Backend.reduce` to `inner` through `intercept(_:_:)` as `.reduce` with its shape as `detail`.
    open func reduce(_ g: ReductionGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try intercept(BackendCall(.reduce, { "\(g.kind)" })) { try inner.reduce(g, input: input, output: output) }
    }
    /// Passes `Backend.reduceBackward` to `inner` through `intercept(_:_:)` as `.reduceBackward` with its shape as `detail`.
    open func reduceBackward(_ g: ReductionGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                             inputGradient: DeviceBuffer) throws {
        try intercept(BackendCall(.reduceBackward, { "\(g.kind)" })) {
            try inner.reduceBackward(g, input: input, outputGradient: outputGradient, inputGradient: inputGradient)
        }
    }

    // MARK: Optimizers
    /// Passes `Backend.sgdStep` to `inner` through `intercept(_:_:)` as `.sgdStep`.
    open func sgdStep(_ h: SGDHyperparameters, parameter: DeviceBuffer, gradient: DeviceBuffer,
                      velocity: DeviceBuffer, count: Int) throws {
        try intercept(BackendCall(.sgdStep)) { try inner.sgdStep(h, parameter: parameter, gradient: gradient, velocity: velocity, count: count) }
    }
    /// Passes `Backend.adamStep` to `inner` through `intercept(_:_:)` as `.adamStep`.
    open func adamStep(_ h: AdamHyperparameters, step: Int, parameter: DeviceBuffer, gradient: DeviceBuffer,
                       m: DeviceBuffer, v: DeviceBuffer, count: Int) throws {
        try intercept(BackendCall(.adamStep)) {
            try inner.adamStep(h, step: step, parameter: parameter, gradient: gradient, m: m, v: v, count: count)
        }
    }

    // MARK: Shapes for `BackendCall.detail`
    static func describe(_ g: ConvGeometry) -> String {
        "\(g.inChannels)->\(g.outChannels) \(g.kernelH)x\(g.kernelW)/\(g.strideH)"
            + (g.groups > 1 ? " g\(g.groups)" : "") + " at \(g.outHeight)x\(g.outWidth)"
    }
    static func describe(_ g: InnerProductGeometry) -> String { "\(g.inputChannels)->\(g.outputChannels)" }
    static func describe(_ g: PoolGeometry) -> String {
        "\(g.kind) \(g.kernelH)x\(g.kernelW)/\(g.strideH) \(g.channels)ch at \(g.inHeight)x\(g.inWidth)"
    }
}

extension Backend {
    /// The backend under any forwarding wrappers (measuring, failing, ...).
    package var innermost: Backend {
        var b: Backend = self
        while let f = b as? ForwardingBackend { b = f.inner }
        return b
    }
}
