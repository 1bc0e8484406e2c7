import Foundation
@testable import Updraft

/// Test-only failure injection: a `Backend` that passes every call to `inner` and fails the Nth call
/// of one op (counting from 1 over the backend's life), like a device whose kernel does not build,
/// whose memory runs out or that errors mid-training. With `deadAfterFailure` every later call fails
/// too (a lost device that no longer answers, not even to read its memory back).
final class FailingBackend: Backend {
    enum Op: String, CaseIterable {
        case makeBuffer, upload, download, fill, copy, accumulate, synchronize
        case uploadRange, downloadRange, copyRows
        case convolutionForward, convolutionBackwardData, convolutionBackwardWeights
        case innerProductForward, innerProductBackwardData, innerProductBackwardWeights
        case activationForward, activationBackward, poolingForward, poolingBackward, concatForward, concatBackward
        case softmaxForward, softmaxBackward, softmaxCrossEntropy, meanSquaredError
        case channelAffine, channelAffineBackward, elementwise, sgdStep, adamStep
    }

    let inner: Backend
    let name: String
    /// The op that fails, and on which of its calls.
    var failOp: Op?
    var failOn = 0
    var error: Error
    var deadAfterFailure: Bool
    private(set) var calls: [Op: Int] = [:]
    private(set) var failures = 0
    private var dead = false

    /// - Parameters:
    ///   - error: what the failing call throws (default: an OpenCL CL_OUT_OF_RESOURCES error).
    init(_ inner: Backend, failing op: Op? = nil, onCall n: Int = 1, error: Error? = nil, deadAfterFailure: Bool = false,
         name: String? = nil) {
        self.inner = inner
        self.name = name ?? "failing(\(inner.name))"
        self.failOp = op
        self.failOn = n
        self.error = error ?? OpenCLError(-5, "clEnqueueNDRangeKernel", "running an injected failure")
        self.deadAfterFailure = deadAfterFailure
    }

    /// Counts the call and throws if it is the one to fail (or the device is dead).
    private func check(_ op: Op) throws {
        if dead { failures += 1; throw UpdraftError(.device, "\(name) stopped answering (injected)") }
        calls[op, default: 0] += 1
        if op == failOp, calls[op] == failOn {
            failures += 1
            if deadAfterFailure { dead = true }
            throw error
        }
    }

    func makeBuffer(count: Int) throws -> DeviceBuffer {
        try check(.makeBuffer)
        if let limit = allocationLimit, count > limit {
            throw OpenCLError(-4, "clCreateBuffer", "allocating \(count) floats, above the injected limit \(limit)")
        }
        return try inner.makeBuffer(count: count)
    }
    func upload(_ values: [Float], to buffer: DeviceBuffer) throws { try check(.upload); try inner.upload(values, to: buffer) }
    func download(_ buffer: DeviceBuffer) throws -> [Float] { try check(.download); return try inner.download(buffer) }
    func fill(_ buffer: DeviceBuffer, with value: Float) throws { try check(.fill); try inner.fill(buffer, with: value) }
    func copy(_ source: DeviceBuffer, to destination: DeviceBuffer) throws { try check(.copy); try inner.copy(source, to: destination) }
    func accumulate(_ source: DeviceBuffer, into destination: DeviceBuffer) throws {
        try check(.accumulate); try inner.accumulate(source, into: destination)
    }
    func synchronize() throws { try check(.synchronize); try inner.synchronize() }
    /// What the backend says of its memory (the inner backend's unless set).
    var memoryOverride: BackendMemory?
    var memory: BackendMemory { memoryOverride ?? inner.memory }
    /// Buffers of more values than this fail to allocate (CL_MEM_OBJECT_ALLOCATION_FAILURE).
    var allocationLimit: Int?
    /// Whether convolutions may write concat slices (the inner backend's answer unless set).
    var slices: Bool?
    var writesConvolutionSlices: Bool { slices ?? inner.writesConvolutionSlices }
    func convolutionForward(_ g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?,
                            output: DeviceBuffer, channelOffset: Int, outputChannels: Int, epilogue: Activation?) throws {
        try check(.convolutionForward)
        try inner.convolutionForward(g, input: input, weights: weights, bias: bias, output: output, channelOffset: channelOffset,
                                     outputChannels: outputChannels, epilogue: epilogue)
    }

    func upload(_ values: [Float], to buffer: DeviceBuffer, offset: Int) throws {
        try check(.uploadRange); try inner.upload(values, to: buffer, offset: offset)
    }
    func download(_ buffer: DeviceBuffer, offset: Int, count: Int) throws -> [Float] {
        try check(.downloadRange); return try inner.download(buffer, offset: offset, count: count)
    }
    func copyRows(_ source: DeviceBuffer, rows sourceRows: [Int], to destination: DeviceBuffer, rows destinationRows: [Int],
                  rowLength: Int) throws {
        try check(.copyRows)
        try inner.copyRows(source, rows: sourceRows, to: destination, rows: destinationRows, rowLength: rowLength)
    }

    func convolutionForward(_ g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?,
                            output: DeviceBuffer, epilogue: Activation?) throws {
        try check(.convolutionForward)
        try inner.convolutionForward(g, input: input, weights: weights, bias: bias, output: output, epilogue: epilogue)
    }
    func convolutionBackwardData(_ g: ConvGeometry, outputGradient: DeviceBuffer, weights: DeviceBuffer,
                                 inputGradient: DeviceBuffer) throws {
        try check(.convolutionBackwardData)
        try inner.convolutionBackwardData(g, outputGradient: outputGradient, weights: weights, inputGradient: inputGradient)
    }
    func convolutionBackwardWeights(_ g: ConvGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                                    weightGradient: DeviceBuffer, biasGradient: DeviceBuffer?) throws {
        try check(.convolutionBackwardWeights)
        try inner.convolutionBackwardWeights(g, input: input, outputGradient: outputGradient, weightGradient: weightGradient,
                                             biasGradient: biasGradient)
    }
    func innerProductForward(_ g: InnerProductGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?,
                             output: DeviceBuffer, epilogue: Activation?) throws {
        try check(.innerProductForward)
        try inner.innerProductForward(g, input: input, weights: weights, bias: bias, output: output, epilogue: epilogue)
    }
    func innerProductBackwardData(_ g: InnerProductGeometry, outputGradient: DeviceBuffer, weights: DeviceBuffer,
                                  inputGradient: DeviceBuffer) throws {
        try check(.innerProductBackwardData)
        try inner.innerProductBackwardData(g, outputGradient: outputGradient, weights: weights, inputGradient: inputGradient)
    }
    func innerProductBackwardWeights(_ g: InnerProductGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                                     weightGradient: DeviceBuffer, biasGradient: DeviceBuffer?) throws {
        try check(.innerProductBackwardWeights)
        try inner.innerProductBackwardWeights(g, input: input, outputGradient: outputGradient, weightGradient: weightGradient,
                                              biasGradient: biasGradient)
    }
    func activationForward(_ a: Activation, _ g: ActivationGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try check(.activationForward)
        try inner.activationForward(a, g, input: input, output: output)
    }
    func activationBackward(_ a: Activation, _ g: ActivationGeometry, input: DeviceBuffer, output: DeviceBuffer, outputGradient: DeviceBuffer, inputGradient: DeviceBuffer) throws {
        try check(.activationBackward)
        try inner.activationBackward(a, g, input: input, output: output, outputGradient: outputGradient,
                                     inputGradient: inputGradient)
    }
    func poolingForward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try check(.poolingForward)
        try inner.poolingForward(g, input: input, output: output)
    }
    func poolingBackward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer, outputGradient: DeviceBuffer,
                         inputGradient: DeviceBuffer) throws {
        try check(.poolingBackward)
        try inner.poolingBackward(g, input: input, output: output, outputGradient: outputGradient, inputGradient: inputGradient)
    }
    func concatForward(_ inputs: [DeviceBuffer], channels: [Int], batch: Int, spatial: Int, output: DeviceBuffer) throws {
        try check(.concatForward)
        try inner.concatForward(inputs, channels: channels, batch: batch, spatial: spatial, output: output)
    }
    func concatBackward(_ outputGradient: DeviceBuffer, channels: [Int], batch: Int, spatial: Int,
                        inputGradients: [DeviceBuffer]) throws {
        try check(.concatBackward)
        try inner.concatBackward(outputGradient, channels: channels, batch: batch, spatial: spatial, inputGradients: inputGradients)
    }
    func softmaxForward(_ g: SoftmaxGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try check(.softmaxForward)
        try inner.softmaxForward(g, input: input, output: output)
    }
    func softmaxBackward(_ g: SoftmaxGeometry, output: DeviceBuffer, outputGradient: DeviceBuffer,
                         inputGradient: DeviceBuffer) throws {
        try check(.softmaxBackward)
        try inner.softmaxBackward(g, output: output, outputGradient: outputGradient, inputGradient: inputGradient)
    }
    func softmaxCrossEntropy(_ g: SoftmaxGeometry, logits: DeviceBuffer, labels: DeviceBuffer, loss: DeviceBuffer,
                             logitsGradient: DeviceBuffer?, correct: DeviceBuffer?) throws {
        try check(.softmaxCrossEntropy)
        try inner.softmaxCrossEntropy(g, logits: logits, labels: labels, loss: loss, logitsGradient: logitsGradient, correct: correct)
    }
    func meanSquaredError(count: Int, input: DeviceBuffer, target: DeviceBuffer, loss: DeviceBuffer,
                          inputGradient: DeviceBuffer?) throws {
        try check(.meanSquaredError)
        try inner.meanSquaredError(count: count, input: input, target: target, loss: loss, inputGradient: inputGradient)
    }
    func channelAffine(_ shape: Shape, input: DeviceBuffer, scale: DeviceBuffer, shift: DeviceBuffer, output: DeviceBuffer) throws {
        try check(.channelAffine)
        try inner.channelAffine(shape, input: input, scale: scale, shift: shift, output: output)
    }
    func channelAffineBackward(_ shape: Shape, outputGradient: DeviceBuffer, scale: DeviceBuffer,
                               inputGradient: DeviceBuffer) throws {
        try check(.channelAffineBackward)
        try inner.channelAffineBackward(shape, outputGradient: outputGradient, scale: scale, inputGradient: inputGradient)
    }
    func elementwise(_ op: ElementwiseOp, _ a: DeviceBuffer, _ b: DeviceBuffer, output: DeviceBuffer, count: Int) throws {
        try check(.elementwise)
        try inner.elementwise(op, a, b, output: output, count: count)
    }
    func sgdStep(_ h: SGDHyperparameters, parameter: DeviceBuffer, gradient: DeviceBuffer, velocity: DeviceBuffer,
                 count: Int) throws {
        try check(.sgdStep)
        try inner.sgdStep(h, parameter: parameter, gradient: gradient, velocity: velocity, count: count)
    }
    func adamStep(_ h: AdamHyperparameters, step: Int, parameter: DeviceBuffer, gradient: DeviceBuffer, m: DeviceBuffer,
                  v: DeviceBuffer, count: Int) throws {
        try check(.adamStep)
        try inner.adamStep(h, step: step, parameter: parameter, gradient: gradient, m: m, v: v, count: count)
    }
}
