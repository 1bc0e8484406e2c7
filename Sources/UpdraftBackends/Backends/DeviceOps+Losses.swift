import UpdraftCore

// Softmax over channels, the two losses and the optimizers' fused update steps, and the `Backend`
// methods that run them. CPU: CPUBackend+Softmax…/+Optimizers; OpenCL: the OpenCLBackend+ files of the
// same names (Kernels/softmax.cl, optimizers.cl); reference: ReferenceBackend.swift.

public extension BackendCall.Kind {
    static let softmaxForward = Self("softmaxForward"), softmaxBackward = Self("softmaxBackward")
    static let softmaxCrossEntropy = Self("softmaxCrossEntropy"), meanSquaredError = Self("meanSquaredError")
    static let sgdStep = Self("sgdStep"), adamStep = Self("adamStep")
}

extension DeviceOps {
    /// y = softmax(x) over channels.
    public struct SoftmaxForward: DeviceOp {
        public let g: SoftmaxGeometry, input: DeviceBuffer, output: DeviceBuffer
        public static var kind: BackendCall.Kind { .softmaxForward }
        public func run(on b: CPUBackend) throws { try b.softmaxForward(g, input: input, output: output) }
        public func run(on b: OpenCLBackend) throws { try b.softmaxForward(g, input: input, output: output) }
        public func run(on b: ReferenceBackend) throws { try b.softmaxForward(g, input: input, output: output) }
    }

    /// dx = y * (dy - sum_c(dy * y)).
    public struct SoftmaxBackward: DeviceOp {
        public let g: SoftmaxGeometry, output: DeviceBuffer, outputGradient: DeviceBuffer, inputGradient: DeviceBuffer
        public static var kind: BackendCall.Kind { .softmaxBackward }
        public func run(on b: CPUBackend) throws {
            try b.softmaxBackward(g, output: output, outputGradient: outputGradient, inputGradient: inputGradient)
        }
        public func run(on b: OpenCLBackend) throws {
            try b.softmaxBackward(g, output: output, outputGradient: outputGradient, inputGradient: inputGradient)
        }
        public func run(on b: ReferenceBackend) throws {
            try b.softmaxBackward(g, output: output, outputGradient: outputGradient, inputGradient: inputGradient)
        }
    }

    /// Fused softmax + categorical cross-entropy on logits [N, C] (g.spatial == 1) with labels [N]
    /// (class indices as floats). loss[0] = mean over n of logsumexp(z_n) - z_n[label_n];
    /// dz = (softmax(z) - onehot(label)) / N; correct[0] = number of rows whose first arg-max is the label.
    public struct SoftmaxCrossEntropy: DeviceOp {
        public let g: SoftmaxGeometry, logits: DeviceBuffer, labels: DeviceBuffer, loss: DeviceBuffer
        public let logitsGradient: DeviceBuffer?, correct: DeviceBuffer?
        public static var kind: BackendCall.Kind { .softmaxCrossEntropy }
        public func run(on b: CPUBackend) throws {
            try b.softmaxCrossEntropy(g, logits: logits, labels: labels, loss: loss, logitsGradient: logitsGradient, correct: correct)
        }
        public func run(on b: OpenCLBackend) throws {
            try b.softmaxCrossEntropy(g, logits: logits, labels: labels, loss: loss, logitsGradient: logitsGradient, correct: correct)
        }
        public func run(on b: ReferenceBackend) throws {
            try b.softmaxCrossEntropy(g, logits: logits, labels: labels, loss: loss, logitsGradient: logitsGradient, correct: correct)
        }
    }

    /// loss[0] = mean over all `count` elements of (x - t)²; dx = 2 (x - t) / count.
    public struct MeanSquaredError: DeviceOp {
        public let count: Int, input: DeviceBuffer, target: DeviceBuffer, loss: DeviceBuffer, inputGradient: DeviceBuffer?
        public static var kind: BackendCall.Kind { .meanSquaredError }
        public func run(on b: CPUBackend) throws {
            try b.meanSquaredError(count: count, input: input, target: target, loss: loss, inputGradient: inputGradient)
        }
        public func run(on b: OpenCLBackend) throws {
            try b.meanSquaredError(count: count, input: input, target: target, loss: loss, inputGradient: inputGradient)
        }
        public func run(on b: ReferenceBackend) throws {
            try b.meanSquaredError(count: count, input: input, target: target, loss: loss, inputGradient: inputGradient)
        }
    }

    /// SGD with momentum, one fused pass over a parameter tensor (`SGDHyperparameters`).
    public struct SGDStep: DeviceOp {
        public let h: SGDHyperparameters, parameter: DeviceBuffer, gradient: DeviceBuffer, velocity: DeviceBuffer, count: Int
        public static var kind: BackendCall.Kind { .sgdStep }
        public func run(on b: CPUBackend) throws {
            try b.sgdStep(h, parameter: parameter, gradient: gradient, velocity: velocity, count: count)
        }
        public func run(on b: OpenCLBackend) throws {
            try b.sgdStep(h, parameter: parameter, gradient: gradient, velocity: velocity, count: count)
        }
        public func run(on b: ReferenceBackend) throws {
            try b.sgdStep(h, parameter: parameter, gradient: gradient, velocity: velocity, count: count)
        }
    }

    /// Adam, one fused pass; `step` counts from 1 (bias correction uses beta^step).
    public struct AdamStep: DeviceOp {
        public let h: AdamHyperparameters, step: Int, parameter: DeviceBuffer, gradient: DeviceBuffer
        public let m: DeviceBuffer, v: DeviceBuffer, count: Int
        public static var kind: BackendCall.Kind { .adamStep }
        public func run(on b: CPUBackend) throws {
            try b.adamStep(h, step: step, parameter: parameter, gradient: gradient, m: m, v: v, count: count)
        }
        public func run(on b: OpenCLBackend) throws {
            try b.adamStep(h, step: step, parameter: parameter, gradient: gradient, m: m, v: v, count: count)
        }
        public func run(on b: ReferenceBackend) throws {
            try b.adamStep(h, step: step, parameter: parameter, gradient: gradient, m: m, v: v, count: count)
        }
    }
}

/// These ops as `Backend` methods (each builds its op and `run`s it).
public extension Backend {
    func softmaxForward(_ g: SoftmaxGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try run(DeviceOps.SoftmaxForward(g: g, input: input, output: output))
    }
    func softmaxBackward(_ g: SoftmaxGeometry, output: DeviceBuffer, outputGradient: DeviceBuffer,
                         inputGradient: DeviceBuffer) throws {
        try run(DeviceOps.SoftmaxBackward(g: g, output: output, outputGradient: outputGradient, inputGradient: inputGradient))
    }
    func softmaxCrossEntropy(_ g: SoftmaxGeometry, logits: DeviceBuffer, labels: DeviceBuffer, loss: DeviceBuffer,
                             logitsGradient: DeviceBuffer?, correct: DeviceBuffer?) throws {
        try run(DeviceOps.SoftmaxCrossEntropy(g: g, logits: logits, labels: labels, loss: loss, logitsGradient: logitsGradient,
                                              correct: correct))
    }
    func meanSquaredError(count: Int, input: DeviceBuffer, target: DeviceBuffer, loss: DeviceBuffer,
                          inputGradient: DeviceBuffer?) throws {
        try run(DeviceOps.MeanSquaredError(count: count, input: input, target: target, loss: loss, inputGradient: inputGradient))
    }
    func sgdStep(_ h: SGDHyperparameters, parameter: DeviceBuffer, gradient: DeviceBuffer,
                 velocity: DeviceBuffer, count: Int) throws {
        try run(DeviceOps.SGDStep(h: h, parameter: parameter, gradient: gradient, velocity: velocity, count: count))
    }
    func adamStep(_ h: AdamHyperparameters, step: Int, parameter: DeviceBuffer, gradient: DeviceBuffer,
                  m: DeviceBuffer, v: DeviceBuffer, count: Int) throws {
        try run(DeviceOps.AdamStep(h: h, step: step, parameter: parameter, gradient: gradient, m: m, v: v, count: count))
    }
}
