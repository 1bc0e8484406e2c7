// Depthwise and grouped convolutions with few input channels per group (Kernels/grouped_convolution.cl):
// direct kernels instead of the implicit GEMM, chosen by the same rule as the CPU backend's direct path.
import UpdraftCore

extension OpenCLBackend {
    /// Input channels per group times kernel taps up to which the direct kernels run (as on the CPU).
    package static let groupedDirectMaxDepth = CPUBackend.groupedDirectMaxDepth

    func usesGroupedDirect(_ g: ConvGeometry) -> Bool {
        g.groups > 1 && g.inChannels / g.groups * g.kernelH * g.kernelW <= Self.groupedDirectMaxDepth
    }

    /// The GCONV_ARGS of grouped_convolution.cl, in order.
    private func groupedArguments(_ g: ConvGeometry) -> [KernelArgument] {
        [g.inChannels, g.inHeight, g.inWidth, g.outChannels, g.outHeight, g.outWidth, g.kernelH, g.kernelW,
         g.strideH, g.strideW, g.dilationH, g.dilationW, g.padTop, g.padLeft, g.groups].map { .int($0) }
    }

    /// y (a channel slice of a wider tensor when outputChannels > Cout) = conv(x, w) + b; checked by the caller.
    func groupedConvolutionForward(_ g: ConvGeometry, x: OpenCLBuffer, w: OpenCLBuffer, b: OpenCLBuffer?, y: OpenCLBuffer,
                                   channelOffset: Int, outputChannels: Int) throws {
        let k = try opsKernel("grouped_convolution.cl", "grouped_conv_forward")
        try k.setArguments([.buffer(x), .buffer(w), .buffer(b ?? w), .int(b == nil ? 0 : 1), .buffer(y),
                            .int(channelOffset), .int(outputChannels), .int(g.outputShape.count)] + groupedArguments(g))
        try launchElementwise(k, count: g.outputShape.count)
    }

    func groupedConvolutionBackwardData(_ g: ConvGeometry, dy: OpenCLBuffer, w: OpenCLBuffer, dx: OpenCLBuffer) throws {
        let k = try opsKernel("grouped_convolution.cl", "grouped_conv_backward_data")
        try k.setArguments([.buffer(dy), .buffer(w), .buffer(dx), .int(g.inputShape.count)] + groupedArguments(g))
        try launchElementwise(k, count: g.inputShape.count)
    }

    func groupedConvolutionBackwardWeights(_ g: ConvGeometry, x: OpenCLBuffer, dy: OpenCLBuffer, dw: OpenCLBuffer) throws {
        let k = try opsKernel("grouped_convolution.cl", "grouped_conv_backward_weights")
        try k.setArguments([.buffer(x), .buffer(dy), .buffer(dw), .int(g.batch)] + groupedArguments(g))
        try launchGroups(k, groups: g.weightShape.count)
    }
}
