/// An inner-product (fully connected) layer: x `[N, C_in]` (any NCHW shape with C*H*W = C_in),
/// weights `[C_out, C_in]` (Core ML's layout), bias `[C_out]`, y `[N, C_out]`.
public struct InnerProductSpec: Hashable, Sendable {
    /// Input features per example C_in (InnerProductLayerParams.inputChannels).
    public var inputChannels: Int
    /// Output features per example C_out (InnerProductLayerParams.outputChannels).
    public var outputChannels: Int
    /// Whether a `[C_out]` bias is added (InnerProductLayerParams.hasBias); default true.
    public var hasBias: Bool = true
    /// An inner-product spec; nothing is checked until `geometry(input:)`.
    public init(inputChannels: Int, outputChannels: Int, hasBias: Bool = true) {
        self.inputChannels = inputChannels; self.outputChannels = outputChannels; self.hasBias = hasBias
    }
    /// Weights `[C_out, C_in]`, Core ML's layout.
    public var weightShape: Shape { [outputChannels, inputChannels] }
    /// Bias `[C_out]`.
    public var biasShape: Shape { [outputChannels] }

    /// Resolves the spec for an input of N examples. Throws `UpdraftError` (`.invalidArgument`) unless the input's per-example element count (C*H*W) is `inputChannels`.
    public func geometry(input: Shape) throws -> InnerProductGeometry {
        guard input.itemCount == inputChannels else {
            throw UpdraftError(.invalidArgument,
                "inner product expects \(inputChannels) inputs per example, got \(input) (\(input.itemCount))")
        }
        return InnerProductGeometry(batch: input.n, inputChannels: inputChannels,
                                    outputChannels: outputChannels, hasBias: hasBias)
    }
}

/// An inner product resolved for a batch: x `[N, C_in]`, weights `[C_out, C_in]`, bias `[C_out]`, y `[N, C_out]`.
public struct InnerProductGeometry: Hashable, Sendable {
    /// Examples N, input features C_in and output features C_out.
    public var batch: Int, inputChannels: Int, outputChannels: Int
    /// Whether a `[C_out]` bias is added.
    public var hasBias: Bool
    /// A geometry with these sizes; nothing is checked.
    public init(batch: Int, inputChannels: Int, outputChannels: Int, hasBias: Bool) {
        self.batch = batch; self.inputChannels = inputChannels; self.outputChannels = outputChannels; self.hasBias = hasBias
    }
    /// Input `[N, C_in]`.
    public var inputShape: Shape { [batch, inputChannels] }
    /// Output `[N, C_out]`.
    public var outputShape: Shape { [batch, outputChannels] }
    /// Weights `[C_out, C_in]`.
    public var weightShape: Shape { [outputChannels, inputChannels] }
    private var macs: Double { Double(batch) * Double(inputChannels) * Double(outputChannels) }
    /// Forward pass: 2 * N * C_in * C_out flops; bytes for input, weights and output.
    public var forwardCost: OpCost {
        OpCost(flops: 2 * macs, bytes: f32Bytes(batch * inputChannels, inputChannels * outputChannels, batch * outputChannels))
    }
    /// Input and weight (and bias) gradients together.
    public var backwardCost: OpCost {
        OpCost(flops: 4 * macs, bytes: f32Bytes(2 * batch * inputChannels, 2 * inputChannels * outputChannels, batch * outputChannels))
    }
}
