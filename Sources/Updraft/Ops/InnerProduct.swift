/// An inner-product (fully connected) layer: x `[N, C_in]` (any NCHW shape with C*H*W = C_in),
/// weights `[C_out, C_in]` (Core ML's layout), bias `[C_out]`, y `[N, C_out]`.
public struct InnerProductSpec: Hashable, Sendable {
    public var inputChannels: Int
    public var outputChannels: Int
    public var hasBias: Bool = true
    public init(inputChannels: Int, outputChannels: Int, hasBias: Bool = true) {
        self.inputChannels = inputChannels; self.outputChannels = outputChannels; self.hasBias = hasBias
    }
    public var weightShape: Shape { [outputChannels, inputChannels] }
    public var biasShape: Shape { [outputChannels] }

    public func geometry(input: Shape) throws -> InnerProductGeometry {
        guard input.itemCount == inputChannels else {
            throw UpdraftError(.invalidArgument,
                "inner product expects \(inputChannels) inputs per example, got \(input) (\(input.itemCount))")
        }
        return InnerProductGeometry(batch: input.n, inputChannels: inputChannels,
                                    outputChannels: outputChannels, hasBias: hasBias)
    }
}

public struct InnerProductGeometry: Hashable, Sendable {
    public var batch: Int, inputChannels: Int, outputChannels: Int
    public var hasBias: Bool
    public init(batch: Int, inputChannels: Int, outputChannels: Int, hasBias: Bool) {
        self.batch = batch; self.inputChannels = inputChannels; self.outputChannels = outputChannels; self.hasBias = hasBias
    }
    public var inputShape: Shape { [batch, inputChannels] }
    public var outputShape: Shape { [batch, outputChannels] }
    public var weightShape: Shape { [outputChannels, inputChannels] }
    private var macs: Double { Double(batch) * Double(inputChannels) * Double(outputChannels) }
    public var forwardCost: OpCost {
        OpCost(flops: 2 * macs, bytes: f32Bytes(batch * inputChannels, inputChannels * outputChannels, batch * outputChannels))
    }
    /// Input and weight (and bias) gradients together.
    public var backwardCost: OpCost {
        OpCost(flops: 4 * macs, bytes: f32Bytes(2 * batch * inputChannels, 2 * inputChannels * outputChannels, batch * outputChannels))
    }
}
