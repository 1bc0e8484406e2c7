// Convolution and inner product on OpenCL: being written (kernels branch). Until it lands these throw.
extension OpenCLBackend {
    private func pending(_ op: String) -> UpdraftError {
        UpdraftError(.unsupported, "\(op) is not implemented on OpenCL yet", hint: "use --compute-units cpuOnly")
    }
    public func convolutionForward(_ g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?,
                                   output: DeviceBuffer, fusedReLU: Bool) throws { throw pending("convolution") }
    public func convolutionBackwardData(_ g: ConvGeometry, outputGradient: DeviceBuffer, weights: DeviceBuffer,
                                        inputGradient: DeviceBuffer) throws { throw pending("convolution backward") }
    public func convolutionBackwardWeights(_ g: ConvGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                                           weightGradient: DeviceBuffer, biasGradient: DeviceBuffer?) throws { throw pending("convolution backward") }
    public func innerProductForward(_ g: InnerProductGeometry, input: DeviceBuffer, weights: DeviceBuffer,
                                    bias: DeviceBuffer?, output: DeviceBuffer) throws { throw pending("inner product") }
    public func innerProductBackwardData(_ g: InnerProductGeometry, outputGradient: DeviceBuffer, weights: DeviceBuffer,
                                         inputGradient: DeviceBuffer) throws { throw pending("inner product backward") }
    public func innerProductBackwardWeights(_ g: InnerProductGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                                            weightGradient: DeviceBuffer, biasGradient: DeviceBuffer?) throws { throw pending("inner product backward") }
}
