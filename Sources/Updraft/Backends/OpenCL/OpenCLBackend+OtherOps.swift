// Element-wise, pooling, softmax/loss, concat and optimizer kernels: being written (kernels branch).
extension OpenCLBackend {
    private func pending(_ op: String) -> UpdraftError {
        UpdraftError(.unsupported, "\(op) is not implemented on OpenCL yet", hint: "use --compute-units cpuOnly")
    }
    public func accumulate(_ source: DeviceBuffer, into destination: DeviceBuffer) throws { throw pending("accumulate") }
    public func activationForward(_ a: Activation, input: DeviceBuffer, output: DeviceBuffer, count: Int) throws { throw pending("activation") }
    public func activationBackward(_ a: Activation, input: DeviceBuffer, output: DeviceBuffer,
                                   outputGradient: DeviceBuffer, inputGradient: DeviceBuffer, count: Int) throws { throw pending("activation") }
    public func poolingForward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer) throws { throw pending("pooling") }
    public func poolingBackward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer,
                                outputGradient: DeviceBuffer, inputGradient: DeviceBuffer) throws { throw pending("pooling") }
    public func concatForward(_ inputs: [DeviceBuffer], channels: [Int], batch: Int, spatial: Int, output: DeviceBuffer) throws { throw pending("concat") }
    public func concatBackward(_ outputGradient: DeviceBuffer, channels: [Int], batch: Int, spatial: Int,
                               inputGradients: [DeviceBuffer]) throws { throw pending("concat") }
    public func softmaxForward(_ g: SoftmaxGeometry, input: DeviceBuffer, output: DeviceBuffer) throws { throw pending("softmax") }
    public func softmaxBackward(_ g: SoftmaxGeometry, output: DeviceBuffer, outputGradient: DeviceBuffer,
                                inputGradient: DeviceBuffer) throws { throw pending("softmax") }
    public func softmaxCrossEntropy(_ g: SoftmaxGeometry, logits: DeviceBuffer, labels: DeviceBuffer, loss: DeviceBuffer,
                                    logitsGradient: DeviceBuffer?, correct: DeviceBuffer?) throws { throw pending("softmax cross-entropy") }
    public func meanSquaredError(count: Int, input: DeviceBuffer, target: DeviceBuffer, loss: DeviceBuffer,
                                 inputGradient: DeviceBuffer?) throws { throw pending("mean squared error") }
    public func channelAffine(_ shape: Shape, input: DeviceBuffer, scale: DeviceBuffer, shift: DeviceBuffer,
                              output: DeviceBuffer) throws { throw pending("batchnorm") }
    public func channelAffineBackward(_ shape: Shape, outputGradient: DeviceBuffer, scale: DeviceBuffer,
                                      inputGradient: DeviceBuffer) throws { throw pending("batchnorm") }
    public func elementwise(_ op: ElementwiseOp, _ a: DeviceBuffer, _ b: DeviceBuffer, output: DeviceBuffer, count: Int) throws { throw pending("elementwise") }
    public func sgdStep(_ h: SGDHyperparameters, parameter: DeviceBuffer, gradient: DeviceBuffer,
                        velocity: DeviceBuffer, count: Int) throws { throw pending("sgd") }
    public func adamStep(_ h: AdamHyperparameters, step: Int, parameter: DeviceBuffer, gradient: DeviceBuffer,
                         m: DeviceBuffer, v: DeviceBuffer, count: Int) throws { throw pending("adam") }
}
