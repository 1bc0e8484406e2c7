import UpdraftCore

// Softmax over channels and the two losses, and the `Backend` methods that run them. CPU:
// CPUBackend+Softmax.swift; OpenCL: OpenCLBackend+Softmax.swift (Kernels/softmax.cl); reference:
// ReferenceBackend.swift. The optimizers' steps: DeviceOps+Optimizers.swift.

public extension BackendCall.Kind {
    static let softmaxForward = Self("softmaxForward"), softmaxBackward = Self("softmaxBackward")
    static let softmaxCrossEntropy = Self("softmaxCrossEntropy"), meanSquaredError = Self("meanSquaredError")
}

extension DeviceOps {
    /// y = softmax(x) over channels.
    public struct SoftmaxForward: SharedDeviceOp {
        public let g: SoftmaxGeometry, input: DeviceBuffer, output: DeviceBuffer
        public static var kind: BackendCall.Kind { .softmaxForward }
        public func perform<B: DeviceImplementations>(on b: B) throws { try b.softmaxForward(g, input: input, output: output) }
    }

    /// dx = y * (dy - sum_c(dy * y)).
    public struct SoftmaxBackward: SharedDeviceOp {
        public let g: SoftmaxGeometry, output: DeviceBuffer, outputGradient: DeviceBuffer, inputGradient: DeviceBuffer
        public static var kind: BackendCall.Kind { .softmaxBackward }
        public func perform<B: DeviceImplementations>(on b: B) throws {
            try b.softmaxBackward(g, output: output, outputGradient: outputGradient, inputGradient: inputGradient)
        }
    }

    /// Fused softmax + categorical cross-entropy on logits [N, C] (g.spatial == 1) with labels [N]
    /// (class indices as floats). loss[0] = mean over n of logsumexp(z_n) - z_n[label_n];
    /// dz = (softmax(z) - onehot(label)) / N; correct[0] = number of rows whose first arg-max is the label.
    public struct SoftmaxCrossEntropy: SharedDeviceOp {
        public let g: SoftmaxGeometry, logits: DeviceBuffer, labels: DeviceBuffer, loss: DeviceBuffer
        public let logitsGradient: DeviceBuffer?, correct: DeviceBuffer?
        public static var kind: BackendCall.Kind { .softmaxCrossEntropy }
        public func perform<B: DeviceImplementations>(on b: B) throws {
            try b.softmaxCrossEntropy(g, logits: logits, labels: labels, loss: loss, logitsGradient: logitsGradient, correct: correct)
        }
    }

    /// loss[0] = mean over all `count` elements of (x - t)²; dx = 2 (x - t) / count.
    public struct MeanSquaredError: SharedDeviceOp {
        public let count: Int, input: DeviceBuffer, target: DeviceBuffer, loss: DeviceBuffer, inputGradient: DeviceBuffer?
        public static var kind: BackendCall.Kind { .meanSquaredError }
        public func perform<B: DeviceImplementations>(on b: B) throws {
            try b.meanSquaredError(count: count, input: input, target: target, loss: loss, inputGradient: inputGradient)
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
}

/// Softmax's and the losses' implementations every kind of backend spells the same way (`SharedDeviceOp.perform`).
public protocol LossImplementations: AnyObject {
    func softmaxForward(_ g: SoftmaxGeometry, input: DeviceBuffer, output: DeviceBuffer) throws
    func softmaxBackward(_ g: SoftmaxGeometry, output: DeviceBuffer, outputGradient: DeviceBuffer,
                         inputGradient: DeviceBuffer) throws
    func softmaxCrossEntropy(_ g: SoftmaxGeometry, logits: DeviceBuffer, labels: DeviceBuffer, loss: DeviceBuffer,
                             logitsGradient: DeviceBuffer?, correct: DeviceBuffer?) throws
    func meanSquaredError(count: Int, input: DeviceBuffer, target: DeviceBuffer, loss: DeviceBuffer,
                          inputGradient: DeviceBuffer?) throws
}
