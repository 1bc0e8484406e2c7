import Foundation
import Updraft

/// A `Backend` that forwards every call to another one and measures: the peak number of bytes held
/// in buffers made through `makeBuffer` (parameters, optimizer state, activations, gradients: what
/// the executor allocates), and, when `timing` is on, the wall time of each op by kind and shape.
/// Buffers are the wrapped backend's own, so its ops accept them unchanged. Scratch memory a backend
/// allocates inside an op (im2col, GEMM packing) is not seen here.
///
/// A buffer counts as live until it is freed: the wrapper holds it weakly and re-adds the live ones
/// whenever a new buffer is made, so the peak is exact at allocation points, where it can only rise.
/// Timing waits for each op to finish (`synchronize`), which costs queued backends their overlap:
/// use it to see where time goes, not for throughput.
final class MeasuringBackend: Backend {
    let inner: Backend
    private struct Entry { weak var buffer: DeviceBuffer?; let bytes: Int }
    private var entries: [Entry] = []
    private(set) var peakBytes = 0
    private(set) var allocations = 0

    /// Time each op (see the type's note).
    var timing = false
    /// Seconds and calls per op key since the last `takeOpTimes()`.
    private var opTimes: [String: OpTime] = [:]

    struct OpTime: Codable { var seconds: Double; var calls: Int }

    init(_ inner: Backend) { self.inner = inner }

    var name: String { inner.name }
    var memory: BackendMemory { inner.memory }
    var writesConvolutionSlices: Bool { inner.writesConvolutionSlices }

    /// Bytes in buffers still alive now.
    var liveBytes: Int { entries.reduce(0) { $0 + ($1.buffer == nil ? 0 : $1.bytes) } }

    /// The op times gathered so far, and a fresh start.
    func takeOpTimes() -> [String: OpTime] {
        defer { opTimes = [:] }
        return opTimes
    }

    private func timed(_ key: @autoclosure () -> String, _ body: () throws -> Void) throws {
        guard timing else { return try body() }
        let start = DispatchTime.now().uptimeNanoseconds
        try body()
        try inner.synchronize()
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        let k = key()
        opTimes[k, default: OpTime(seconds: 0, calls: 0)].seconds += seconds
        opTimes[k, default: OpTime(seconds: 0, calls: 0)].calls += 1
    }

    private static func conv(_ g: ConvGeometry) -> String {
        "\(g.inChannels)->\(g.outChannels) \(g.kernelH)x\(g.kernelW)/\(g.strideH) at \(g.outHeight)x\(g.outWidth)"
    }
    private static func pool(_ g: PoolGeometry) -> String {
        "\(g.kind) \(g.kernelH)x\(g.kernelW)/\(g.strideH) \(g.channels)ch at \(g.inHeight)x\(g.inWidth)"
    }

    func makeBuffer(count: Int) throws -> DeviceBuffer {
        let b = try inner.makeBuffer(count: count)
        allocations += 1
        entries.removeAll { $0.buffer == nil }
        entries.append(Entry(buffer: b, bytes: b.count * MemoryLayout<Float>.size))
        peakBytes = max(peakBytes, liveBytes)
        return b
    }

    func upload(_ values: [Float], to buffer: DeviceBuffer) throws {
        try timed("upload") { try inner.upload(values, to: buffer) }
    }
    func downloadLater(_ buffer: DeviceBuffer) throws -> PendingDownload {
        var pending: PendingDownload?
        try timed("download") { pending = try inner.downloadLater(buffer) }
        return pending!
    }
        func download(_ buffer: DeviceBuffer) throws -> [Float] {
        var values: [Float] = []
        try timed("download") { values = try inner.download(buffer) }
        return values
    }
    func upload(_ values: [Float], to buffer: DeviceBuffer, offset: Int) throws {
        try timed("upload rows") { try inner.upload(values, to: buffer, offset: offset) }
    }
    func download(_ buffer: DeviceBuffer, offset: Int, count: Int) throws -> [Float] {
        var values: [Float] = []
        try timed("download rows") { values = try inner.download(buffer, offset: offset, count: count) }
        return values
    }
    func copyRows(_ source: DeviceBuffer, rows sourceRows: [Int], to destination: DeviceBuffer, rows destinationRows: [Int],
                  rowLength: Int) throws {
        try timed("copy rows") {
            try inner.copyRows(source, rows: sourceRows, to: destination, rows: destinationRows, rowLength: rowLength)
        }
    }
    func fill(_ buffer: DeviceBuffer, with value: Float) throws {
        try timed("fill") { try inner.fill(buffer, with: value) }
    }
    func copy(_ source: DeviceBuffer, to destination: DeviceBuffer) throws {
        try timed("copy") { try inner.copy(source, to: destination) }
    }
    func accumulate(_ source: DeviceBuffer, into destination: DeviceBuffer) throws {
        try timed("accumulate") { try inner.accumulate(source, into: destination) }
    }
    func synchronize() throws { try inner.synchronize() }

    func convolutionForward(_ g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?,
                            output: DeviceBuffer, epilogue: Activation?) throws {
        try timed("convolution forward " + Self.conv(g)) {
            try inner.convolutionForward(g, input: input, weights: weights, bias: bias, output: output, epilogue: epilogue)
        }
    }
    func convolutionForward(_ g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?,
                            output: DeviceBuffer, channelOffset: Int, outputChannels: Int, epilogue: Activation?) throws {
        try timed("convolution forward " + Self.conv(g)) {
            try inner.convolutionForward(g, input: input, weights: weights, bias: bias, output: output, channelOffset: channelOffset,
                                         outputChannels: outputChannels, epilogue: epilogue)
        }
    }
    func convolutionBackwardData(_ g: ConvGeometry, outputGradient: DeviceBuffer, weights: DeviceBuffer,
                                 inputGradient: DeviceBuffer) throws {
        try timed("convolution backward data " + Self.conv(g)) {
            try inner.convolutionBackwardData(g, outputGradient: outputGradient, weights: weights, inputGradient: inputGradient)
        }
    }
    func convolutionBackwardWeights(_ g: ConvGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                                    weightGradient: DeviceBuffer, biasGradient: DeviceBuffer?) throws {
        try timed("convolution backward weights " + Self.conv(g)) {
            try inner.convolutionBackwardWeights(g, input: input, outputGradient: outputGradient,
                                                 weightGradient: weightGradient, biasGradient: biasGradient)
        }
    }

    func innerProductForward(_ g: InnerProductGeometry, input: DeviceBuffer, weights: DeviceBuffer,
                             bias: DeviceBuffer?, output: DeviceBuffer, epilogue: Activation?) throws {
        try timed("inner product forward \(g.inputChannels)->\(g.outputChannels)") {
            try inner.innerProductForward(g, input: input, weights: weights, bias: bias, output: output, epilogue: epilogue)
        }
    }
    func innerProductBackwardData(_ g: InnerProductGeometry, outputGradient: DeviceBuffer, weights: DeviceBuffer,
                                  inputGradient: DeviceBuffer) throws {
        try timed("inner product backward data \(g.inputChannels)->\(g.outputChannels)") {
            try inner.innerProductBackwardData(g, outputGradient: outputGradient, weights: weights, inputGradient: inputGradient)
        }
    }
    func innerProductBackwardWeights(_ g: InnerProductGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                                     weightGradient: DeviceBuffer, biasGradient: DeviceBuffer?) throws {
        try timed("inner product backward weights \(g.inputChannels)->\(g.outputChannels)") {
            try inner.innerProductBackwardWeights(g, input: input, outputGradient: outputGradient,
                                                  weightGradient: weightGradient, biasGradient: biasGradient)
        }
    }

    func activationForward(_ a: Activation, _ g: ActivationGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try timed("activation forward \(a)") { try inner.activationForward(a, g, input: input, output: output) }
    }
    func activationBackward(_ a: Activation, _ g: ActivationGeometry, input: DeviceBuffer, output: DeviceBuffer,
                            outputGradient: DeviceBuffer, inputGradient: DeviceBuffer) throws {
        try timed("activation backward \(a)") {
            try inner.activationBackward(a, g, input: input, output: output, outputGradient: outputGradient,
                                         inputGradient: inputGradient)
        }
    }

    func poolingForward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try timed("pooling forward " + Self.pool(g)) { try inner.poolingForward(g, input: input, output: output) }
    }
    func poolingBackward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer,
                         outputGradient: DeviceBuffer, inputGradient: DeviceBuffer) throws {
        try timed("pooling backward " + Self.pool(g)) {
            try inner.poolingBackward(g, input: input, output: output, outputGradient: outputGradient, inputGradient: inputGradient)
        }
    }

    func concatForward(_ inputs: [DeviceBuffer], channels: [Int], batch: Int, spatial: Int, output: DeviceBuffer) throws {
        try timed("concat forward") {
            try inner.concatForward(inputs, channels: channels, batch: batch, spatial: spatial, output: output)
        }
    }
    func concatBackward(_ outputGradient: DeviceBuffer, channels: [Int], batch: Int, spatial: Int,
                        inputGradients: [DeviceBuffer]) throws {
        try timed("concat backward") {
            try inner.concatBackward(outputGradient, channels: channels, batch: batch, spatial: spatial,
                                     inputGradients: inputGradients)
        }
    }

    func softmaxForward(_ g: SoftmaxGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try timed("softmax forward") { try inner.softmaxForward(g, input: input, output: output) }
    }
    func softmaxBackward(_ g: SoftmaxGeometry, output: DeviceBuffer, outputGradient: DeviceBuffer,
                         inputGradient: DeviceBuffer) throws {
        try timed("softmax backward") {
            try inner.softmaxBackward(g, output: output, outputGradient: outputGradient, inputGradient: inputGradient)
        }
    }
    func softmaxCrossEntropy(_ g: SoftmaxGeometry, logits: DeviceBuffer, labels: DeviceBuffer, loss: DeviceBuffer,
                             logitsGradient: DeviceBuffer?, correct: DeviceBuffer?) throws {
        try timed("softmax cross-entropy") {
            try inner.softmaxCrossEntropy(g, logits: logits, labels: labels, loss: loss, logitsGradient: logitsGradient,
                                          correct: correct)
        }
    }
    func meanSquaredError(count: Int, input: DeviceBuffer, target: DeviceBuffer, loss: DeviceBuffer,
                          inputGradient: DeviceBuffer?) throws {
        try timed("mean squared error") {
            try inner.meanSquaredError(count: count, input: input, target: target, loss: loss, inputGradient: inputGradient)
        }
    }

    func channelAffine(_ shape: Shape, input: DeviceBuffer, scale: DeviceBuffer, shift: DeviceBuffer,
                       output: DeviceBuffer) throws {
        try timed("channel affine") { try inner.channelAffine(shape, input: input, scale: scale, shift: shift, output: output) }
    }
    func channelAffineBackward(_ shape: Shape, outputGradient: DeviceBuffer, scale: DeviceBuffer,
                               inputGradient: DeviceBuffer) throws {
        try timed("channel affine backward") {
            try inner.channelAffineBackward(shape, outputGradient: outputGradient, scale: scale, inputGradient: inputGradient)
        }
    }
    func elementwise(_ op: ElementwiseOp, _ a: DeviceBuffer, _ b: DeviceBuffer, output: DeviceBuffer, count: Int) throws {
        try timed("elementwise \(op)") { try inner.elementwise(op, a, b, output: output, count: count) }
    }

    func sgdStep(_ h: SGDHyperparameters, parameter: DeviceBuffer, gradient: DeviceBuffer,
                 velocity: DeviceBuffer, count: Int) throws {
        try timed("sgd step") { try inner.sgdStep(h, parameter: parameter, gradient: gradient, velocity: velocity, count: count) }
    }
    func adamStep(_ h: AdamHyperparameters, step: Int, parameter: DeviceBuffer, gradient: DeviceBuffer,
                  m: DeviceBuffer, v: DeviceBuffer, count: Int) throws {
        try timed("adam step") { try inner.adamStep(h, step: step, parameter: parameter, gradient: gradient, m: m, v: v, count: count) }
    }

    // Spatial ops, broadcasting and reductions: forwarded too (the protocol's defaults would run them
    // through the host instead of the wrapped backend's kernels).
    func spatialForward(_ g: SpatialGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try timed("\(g.op.familyName) \(g.inputShape.dims.dropFirst())") { try inner.spatialForward(g, input: input, output: output) }
    }
    func spatialBackward(_ g: SpatialGeometry, input: DeviceBuffer, output: DeviceBuffer, outputGradient: DeviceBuffer,
                         inputGradient: DeviceBuffer) throws {
        try timed("\(g.op.familyName) backward \(g.inputShape.dims.dropFirst())") {
            try inner.spatialBackward(g, input: input, output: output, outputGradient: outputGradient, inputGradient: inputGradient)
        }
    }
    func broadcastBinary(_ g: BroadcastGeometry, _ a: DeviceBuffer, _ b: DeviceBuffer, output: DeviceBuffer) throws {
        try timed("broadcast \(g.op.rawValue) \(g.aDims.dropFirst()) \(g.bDims.dropFirst())") { try inner.broadcastBinary(g, a, b, output: output) }
    }
    func reduce(_ g: ReductionGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try timed("reduce \(g.kind) \(g.inputDims.dropFirst()) to \(g.outputDims.dropFirst())") { try inner.reduce(g, input: input, output: output) }
    }
    func reduceBackward(_ g: ReductionGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer, inputGradient: DeviceBuffer) throws {
        try timed("reduce \(g.kind) backward \(g.inputDims.dropFirst())") {
            try inner.reduceBackward(g, input: input, outputGradient: outputGradient, inputGradient: inputGradient)
        }
    }
}
