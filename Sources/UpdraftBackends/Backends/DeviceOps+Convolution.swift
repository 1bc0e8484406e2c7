import UpdraftCore

// Convolution — x [N, Cin, H, W], w [Cout, Cin/g, kH, kW], b [Cout], y [N, Cout, Ho, Wo] — and inner
// product — x [N, Cin], w [Cout, Cin], b [Cout], y [N, Cout]: the ops, and the `Backend` methods that
// run them. CPU: CPUBackend+Convolution.swift (+Winograd, +SmallKConvolution, +GroupedConvolution,
// +OneDNN), CPUBackend+InnerProduct.swift; OpenCL: OpenCLBackend+Convolution.swift (+CLBlast,
// +GroupedConvolution), OpenCLBackend+InnerProduct.swift; reference: ReferenceBackend.swift.

public extension BackendCall.Kind {
    static let convolutionForward = Self("convolutionForward"), convolutionSliceForward = Self("convolutionSliceForward")
    static let convolutionHalfForward = Self("convolutionHalfForward")
    static let convolutionBackwardData = Self("convolutionBackwardData")
    static let convolutionBackwardWeights = Self("convolutionBackwardWeights")
    static let innerProductForward = Self("innerProductForward"), innerProductBackwardData = Self("innerProductBackwardData")
    static let innerProductBackwardWeights = Self("innerProductBackwardWeights")
}

extension ConvGeometry {
    /// "16->32 3x3/2 at 28x28" (with " g4" for groups): the detail wrappers show.
    public var callDetail: String {
        "\(inChannels)->\(outChannels) \(kernelH)x\(kernelW)/\(strideH)" + (groups > 1 ? " g\(groups)" : "")
            + " at \(outHeight)x\(outWidth)"
    }
}

extension InnerProductGeometry {
    /// "512->10": the detail wrappers show.
    public var callDetail: String { "\(inputChannels)->\(outputChannels)" }
}

extension DeviceOps {
    /// y = conv(x, w) + b (+ `residual`, a tensor of y's shape: a residual add fused into the
    /// convolution), then the `epilogue` function in the same pass (any `Activation`; per-channel
    /// constants indexed by output channel).
    public struct ConvolutionForward: SharedDeviceOp {
        public let g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?, output: DeviceBuffer
        public let epilogue: Activation?
        public var residual: DeviceBuffer? = nil
        public static var kind: BackendCall.Kind { .convolutionForward }
        public var detail: String { g.callDetail + (residual == nil ? "" : " + residual") }
        public func perform<B: DeviceImplementations>(on b: B) throws {
            try b.convolutionForward(g, input: input, weights: weights, bias: bias, output: output, residual: residual, epilogue: epilogue)
        }
    }

    /// `ConvolutionForward` into channels [channelOffset, channelOffset + g.outChannels) of an output
    /// [N, outputChannels, Ho, Wo], leaving its other channels as they are: convolutions that feed a
    /// channel concat write their slices of its output directly, and the concat is not run. The
    /// reference goes through the host (`Backend.hostConvolutionSliceForward`).
    public struct ConvolutionSliceForward: DeviceOp {
        public let g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?, output: DeviceBuffer
        public let channelOffset: Int, outputChannels: Int, epilogue: Activation?
        public static var kind: BackendCall.Kind { .convolutionSliceForward }
        public var detail: String { g.callDetail }
        public func run(on b: CPUBackend) throws {
            try b.convolutionForward(g, input: input, weights: weights, bias: bias, output: output, channelOffset: channelOffset,
                                     outputChannels: outputChannels, epilogue: epilogue)
        }
        public func run(on b: OpenCLBackend) throws {
            try b.convolutionForward(g, input: input, weights: weights, bias: bias, output: output, channelOffset: channelOffset,
                                     outputChannels: outputChannels, epilogue: epilogue)
        }
        public func run(on b: ReferenceBackend) throws {
            try b.hostConvolutionSliceForward(g, input: input, weights: weights, bias: bias, output: output,
                                              channelOffset: channelOffset, outputChannels: outputChannels, epilogue: epilogue)
        }
    }

    /// The slice form with the input and/or the output kept as IEEE halves (`storage`; a half buffer
    /// holds two values per float, counts and offsets in values), arithmetic in fp32, each stored value
    /// rounded to nearest even: the frozen prefix's fp16 option. Returns false, having done nothing,
    /// where the backend has no such kernel (the CPU and the reference: only OpenCL has one); the
    /// executor then converts around the fp32 op (`Executor.forwardHalfStored`), which is also the CPU twin.
    public struct ConvolutionHalfForward: HalfStoredOp {
        public let slice: ConvolutionSliceForward, storage: HalfStorage
        public static var kind: BackendCall.Kind { .convolutionHalfForward }
        public var detail: String { slice.g.callDetail }
        public var floatOp: ConvolutionSliceForward { slice }
        public func run(on b: OpenCLBackend) throws -> Bool {
            let s = slice
            return try b.convolutionForward(s.g, input: s.input, weights: s.weights, bias: s.bias, output: s.output,
                                            channelOffset: s.channelOffset, outputChannels: s.outputChannels,
                                            epilogue: s.epilogue, storage: storage)
        }
    }

    /// dx from dy and w.
    public struct ConvolutionBackwardData: SharedDeviceOp {
        public let g: ConvGeometry, outputGradient: DeviceBuffer, weights: DeviceBuffer, inputGradient: DeviceBuffer
        public static var kind: BackendCall.Kind { .convolutionBackwardData }
        public var detail: String { g.callDetail }
        public func perform<B: DeviceImplementations>(on b: B) throws {
            try b.convolutionBackwardData(g, outputGradient: outputGradient, weights: weights, inputGradient: inputGradient)
        }
    }

    /// dw (and db = sum of dy over N, Ho, Wo) from x and dy.
    public struct ConvolutionBackwardWeights: SharedDeviceOp {
        public let g: ConvGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer, weightGradient: DeviceBuffer
        public let biasGradient: DeviceBuffer?
        public static var kind: BackendCall.Kind { .convolutionBackwardWeights }
        public var detail: String { g.callDetail }
        public func perform<B: DeviceImplementations>(on b: B) throws {
            try b.convolutionBackwardWeights(g, input: input, outputGradient: outputGradient, weightGradient: weightGradient,
                                             biasGradient: biasGradient)
        }
    }

    /// y = x . w^T + b, then the `epilogue` function (per-channel constants indexed by output channel).
    public struct InnerProductForward: SharedDeviceOp {
        public let g: InnerProductGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?
        public let output: DeviceBuffer, epilogue: Activation?
        public static var kind: BackendCall.Kind { .innerProductForward }
        public var detail: String { g.callDetail }
        public func perform<B: DeviceImplementations>(on b: B) throws {
            try b.innerProductForward(g, input: input, weights: weights, bias: bias, output: output, epilogue: epilogue)
        }
    }

    /// dx = dy . w.
    public struct InnerProductBackwardData: SharedDeviceOp {
        public let g: InnerProductGeometry, outputGradient: DeviceBuffer, weights: DeviceBuffer, inputGradient: DeviceBuffer
        public static var kind: BackendCall.Kind { .innerProductBackwardData }
        public var detail: String { g.callDetail }
        public func perform<B: DeviceImplementations>(on b: B) throws {
            try b.innerProductBackwardData(g, outputGradient: outputGradient, weights: weights, inputGradient: inputGradient)
        }
    }

    /// dw = dy^T . x (and db = sum of dy over N).
    public struct InnerProductBackwardWeights: SharedDeviceOp {
        public let g: InnerProductGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer, weightGradient: DeviceBuffer
        public let biasGradient: DeviceBuffer?
        public static var kind: BackendCall.Kind { .innerProductBackwardWeights }
        public var detail: String { g.callDetail }
        public func perform<B: DeviceImplementations>(on b: B) throws {
            try b.innerProductBackwardWeights(g, input: input, outputGradient: outputGradient, weightGradient: weightGradient,
                                              biasGradient: biasGradient)
        }
    }
}

/// The convolution and inner-product ops as `Backend` methods (each builds its op and `run`s it).
public extension Backend {
    func convolutionForward(_ g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?,
                            output: DeviceBuffer, epilogue: Activation?) throws {
        try run(DeviceOps.ConvolutionForward(g: g, input: input, weights: weights, bias: bias, output: output, epilogue: epilogue))
    }
    /// y = epilogue(conv(x, w) + b + residual): a residual add (and the function after it) fused into the convolution.
    func convolutionForward(_ g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?,
                            output: DeviceBuffer, residual: DeviceBuffer?, epilogue: Activation?) throws {
        try run(DeviceOps.ConvolutionForward(g: g, input: input, weights: weights, bias: bias, output: output, epilogue: epilogue,
                                             residual: residual))
    }
    func convolutionForward(_ g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?,
                            output: DeviceBuffer, channelOffset: Int, outputChannels: Int, epilogue: Activation?) throws {
        try run(DeviceOps.ConvolutionSliceForward(g: g, input: input, weights: weights, bias: bias, output: output,
                                                  channelOffset: channelOffset, outputChannels: outputChannels, epilogue: epilogue))
    }
    func convolutionForward(_ g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?,
                            output: DeviceBuffer, channelOffset: Int, outputChannels: Int, epilogue: Activation?,
                            storage: HalfStorage) throws -> Bool {
        let slice = DeviceOps.ConvolutionSliceForward(g: g, input: input, weights: weights, bias: bias, output: output,
                                                      channelOffset: channelOffset, outputChannels: outputChannels, epilogue: epilogue)
        return try run(DeviceOps.ConvolutionHalfForward(slice: slice, storage: storage))
    }
    func convolutionBackwardData(_ g: ConvGeometry, outputGradient: DeviceBuffer, weights: DeviceBuffer,
                                 inputGradient: DeviceBuffer) throws {
        try run(DeviceOps.ConvolutionBackwardData(g: g, outputGradient: outputGradient, weights: weights, inputGradient: inputGradient))
    }
    func convolutionBackwardWeights(_ g: ConvGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                                    weightGradient: DeviceBuffer, biasGradient: DeviceBuffer?) throws {
        try run(DeviceOps.ConvolutionBackwardWeights(g: g, input: input, outputGradient: outputGradient,
                                                     weightGradient: weightGradient, biasGradient: biasGradient))
    }
    func innerProductForward(_ g: InnerProductGeometry, input: DeviceBuffer, weights: DeviceBuffer,
                             bias: DeviceBuffer?, output: DeviceBuffer, epilogue: Activation?) throws {
        try run(DeviceOps.InnerProductForward(g: g, input: input, weights: weights, bias: bias, output: output, epilogue: epilogue))
    }
    func innerProductBackwardData(_ g: InnerProductGeometry, outputGradient: DeviceBuffer, weights: DeviceBuffer,
                                  inputGradient: DeviceBuffer) throws {
        try run(DeviceOps.InnerProductBackwardData(g: g, outputGradient: outputGradient, weights: weights, inputGradient: inputGradient))
    }
    func innerProductBackwardWeights(_ g: InnerProductGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                                     weightGradient: DeviceBuffer, biasGradient: DeviceBuffer?) throws {
        try run(DeviceOps.InnerProductBackwardWeights(g: g, input: input, outputGradient: outputGradient,
                                                      weightGradient: weightGradient, biasGradient: biasGradient))
    }
}

/// The convolution and inner-product implementations every kind of backend spells the same way, so
/// that each op of the family writes its call once (`SharedDeviceOp.perform`).
public protocol ConvolutionImplementations: AnyObject {
    func convolutionForward(_ g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?,
                            output: DeviceBuffer, residual: DeviceBuffer?, epilogue: Activation?) throws
    func convolutionBackwardData(_ g: ConvGeometry, outputGradient: DeviceBuffer, weights: DeviceBuffer,
                                 inputGradient: DeviceBuffer) throws
    func convolutionBackwardWeights(_ g: ConvGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                                    weightGradient: DeviceBuffer, biasGradient: DeviceBuffer?) throws
    func innerProductForward(_ g: InnerProductGeometry, input: DeviceBuffer, weights: DeviceBuffer,
                             bias: DeviceBuffer?, output: DeviceBuffer, epilogue: Activation?) throws
    func innerProductBackwardData(_ g: InnerProductGeometry, outputGradient: DeviceBuffer, weights: DeviceBuffer,
                                  inputGradient: DeviceBuffer) throws
    func innerProductBackwardWeights(_ g: InnerProductGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                                     weightGradient: DeviceBuffer, biasGradient: DeviceBuffer?) throws
}
