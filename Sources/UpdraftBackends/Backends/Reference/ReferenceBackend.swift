import UpdraftCore

/// The `Backend` that runs `Reference`: every op widens its float32 buffers to Double, calls the
/// reference loops, and rounds the results back to float32. Slow and simple, it is the yardstick for
/// the other backends (see `BackendComparison`) and a way to train tiny models with no other device.
///
/// Buffers are `HostBuffer`s (from this or another CPU backend); a buffer of another backend throws.
/// A buffer must hold at least the elements an op reads or writes (a larger one is fine: elements
/// past those are neither read nor changed); a smaller one throws. Work runs immediately, so
/// `synchronize` has nothing to wait for.
public final class ReferenceBackend: Backend {
    /// Always "reference".
    public let name = "reference"
    /// Always true: buffers are host arrays.
    public var runsOnHostCPU: Bool { true }
    /// A reference backend; it holds no state, so any number may be made.
    public init() {}

    // MARK: Buffer access

    func host(_ buffer: DeviceBuffer, _ what: String) throws -> HostBuffer {
        try HostBuffer.cast(buffer, backend: name, what)
    }

    /// The first `count` elements of `buffer`, as Double.
    func read(_ buffer: DeviceBuffer, count: Int, _ what: String) throws -> [Double] {
        let b = try host(buffer, what)
        try requireCapacity(b, count, what)
        return b.values[0..<count].map(Double.init)
    }

    /// Stores `values` (rounded to float32) into the first `values.count` elements of `buffer`.
    func write(_ values: [Double], to buffer: DeviceBuffer, _ what: String) throws {
        let b = try host(buffer, what)
        try requireCapacity(b, values.count, what)
        for i in 0..<values.count { b.values[i] = Float(values[i]) }
    }

    private func requireCapacity(_ b: HostBuffer, _ count: Int, _ what: String) throws {
        guard count >= 0, b.count >= count else {
            throw UpdraftError(.invalidArgument, "\(name): \(what) holds \(b.count) values, the op needs \(count)",
                               hint: "allocate buffers from the op's geometry (e.g. outputShape.count)")
        }
    }

    /// A bias buffer must be passed exactly when the geometry says the layer has one.
    private func requireBias(_ hasBias: Bool, _ bias: DeviceBuffer?, _ op: String) throws {
        if hasBias != (bias != nil) {
            throw UpdraftError(.invalidArgument,
                hasBias ? "\(name): \(op) geometry has a bias but no bias buffer was passed"
                        : "\(name): \(op) geometry has no bias but a bias buffer was passed")
        }
    }

    // MARK: Memory

    /// A zero-filled `HostBuffer` of `count` floats; throws `.invalidArgument` for a negative count.
    public func makeBuffer(count: Int) throws -> DeviceBuffer {
        guard count >= 0 else { throw UpdraftError(.invalidArgument, "\(name): cannot make a buffer of \(count) values") }
        return HostBuffer(count: count)
    }

    /// Replaces the buffer's values; `values.count` must equal the buffer's count.
    public func upload(_ values: [Float], to buffer: DeviceBuffer) throws {
        let b = try host(buffer, "upload destination")
        guard values.count == b.count else {
            throw UpdraftError(.invalidArgument, "\(name): uploading \(values.count) values into a buffer of \(b.count)")
        }
        b.values = values
    }

    /// The buffer's values as they are (work has already run).
    public func download(_ buffer: DeviceBuffer) throws -> [Float] { try host(buffer, "download source").values }

    /// Sets every value of the buffer.
    public func fill(_ buffer: DeviceBuffer, with value: Float) throws {
        let b = try host(buffer, "fill destination")
        b.values = [Float](repeating: value, count: b.count)
    }

    /// Copies `source.count` values; the destination may be larger (the rest is untouched).
    public func copy(_ source: DeviceBuffer, to destination: DeviceBuffer) throws {
        let s = try host(source, "copy source"), d = try host(destination, "copy destination")
        try requireCapacity(d, s.count, "copy destination")
        for i in 0..<s.count { d.values[i] = s.values[i] }
    }

    /// Adds in Double, then rounds each sum to float32.
    public func accumulate(_ source: DeviceBuffer, into destination: DeviceBuffer) throws {
        let s = try host(source, "accumulate source"), d = try host(destination, "accumulate destination")
        try requireCapacity(d, s.count, "accumulate destination")
        for i in 0..<s.count { d.values[i] = Float(Double(d.values[i]) + Double(s.values[i])) }
    }

    /// Does nothing: every op has finished when it returns.
    public func synchronize() throws {}

    // MARK: Convolution

    /// Runs `Reference.convolutionForward` on the buffers widened to Double, then rounds the results to float32.
    public func convolutionForward(_ g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?,
                                   output: DeviceBuffer, residual: DeviceBuffer? = nil, epilogue: Activation?) throws {
        try requireBias(g.hasBias, bias, "convolution")
        let x = try read(input, count: g.inputShape.count, "convolution input")
        let w = try read(weights, count: g.weightShape.count, "convolution weights")
        let b = try bias.map { try read($0, count: g.outChannels, "convolution bias") }
        let r = try residual.map { try read($0, count: g.outputShape.count, "convolution residual") }
        let y = try Reference.convolutionForward(g, input: x, weights: w, bias: b, residual: r, epilogue: epilogue)
        try write(y, to: output, "convolution output")
    }

    /// Runs `Reference.convolutionBackwardData` on the buffers widened to Double, then rounds the results to float32.
    public func convolutionBackwardData(_ g: ConvGeometry, outputGradient: DeviceBuffer, weights: DeviceBuffer,
                                        inputGradient: DeviceBuffer) throws {
        let dy = try read(outputGradient, count: g.outputShape.count, "convolution output gradient")
        let w = try read(weights, count: g.weightShape.count, "convolution weights")
        let dx = try Reference.convolutionBackwardData(g, outputGradient: dy, weights: w)
        try write(dx, to: inputGradient, "convolution input gradient")
    }

    /// Runs `Reference.convolutionBackwardWeights` on the buffers widened to Double, then rounds the results to float32.
    public func convolutionBackwardWeights(_ g: ConvGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                                           weightGradient: DeviceBuffer, biasGradient: DeviceBuffer?) throws {
        if !g.hasBias, biasGradient != nil {
            throw UpdraftError(.invalidArgument, "\(name): convolution geometry has no bias but a bias gradient buffer was passed")
        }
        let x = try read(input, count: g.inputShape.count, "convolution input")
        let dy = try read(outputGradient, count: g.outputShape.count, "convolution output gradient")
        let (dw, db) = try Reference.convolutionBackwardWeights(g, input: x, outputGradient: dy)
        try write(dw, to: weightGradient, "convolution weight gradient")
        if let biasGradient { try write(db, to: biasGradient, "convolution bias gradient") }
    }

    // MARK: Inner product

    /// Runs `Reference.innerProductForward` on the buffers widened to Double, then rounds the results to float32.
    public func innerProductForward(_ g: InnerProductGeometry, input: DeviceBuffer, weights: DeviceBuffer,
                                    bias: DeviceBuffer?, output: DeviceBuffer, epilogue: Activation?) throws {
        try requireBias(g.hasBias, bias, "inner product")
        let x = try read(input, count: g.batch * g.inputChannels, "inner product input")
        let w = try read(weights, count: g.outputChannels * g.inputChannels, "inner product weights")
        let b = try bias.map { try read($0, count: g.outputChannels, "inner product bias") }
        try write(try Reference.innerProductForward(g, input: x, weights: w, bias: b, epilogue: epilogue), to: output, "inner product output")
    }

    /// Runs `Reference.innerProductBackwardData` on the buffers widened to Double, then rounds the results to float32.
    public func innerProductBackwardData(_ g: InnerProductGeometry, outputGradient: DeviceBuffer, weights: DeviceBuffer,
                                         inputGradient: DeviceBuffer) throws {
        let dy = try read(outputGradient, count: g.batch * g.outputChannels, "inner product output gradient")
        let w = try read(weights, count: g.outputChannels * g.inputChannels, "inner product weights")
        try write(try Reference.innerProductBackwardData(g, outputGradient: dy, weights: w),
                  to: inputGradient, "inner product input gradient")
    }

    /// Runs `Reference.innerProductBackwardWeights` on the buffers widened to Double, then rounds the results to float32.
    public func innerProductBackwardWeights(_ g: InnerProductGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                                            weightGradient: DeviceBuffer, biasGradient: DeviceBuffer?) throws {
        if !g.hasBias, biasGradient != nil {
            throw UpdraftError(.invalidArgument, "\(name): inner product geometry has no bias but a bias gradient buffer was passed")
        }
        let x = try read(input, count: g.batch * g.inputChannels, "inner product input")
        let dy = try read(outputGradient, count: g.batch * g.outputChannels, "inner product output gradient")
        let (dw, db) = try Reference.innerProductBackwardWeights(g, input: x, outputGradient: dy)
        try write(dw, to: weightGradient, "inner product weight gradient")
        if let biasGradient { try write(db, to: biasGradient, "inner product bias gradient") }
    }

    // MARK: Activations

    /// Runs `Reference.activationForward` on the buffers widened to Double, then rounds the results to float32.
    public func activationForward(_ a: Activation, _ g: ActivationGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        let x = try read(input, count: g.count, "\(a) input")
        try write(try Reference.activationForward(a, g, input: x), to: output, "\(a) output")
    }

    /// Runs `Reference.activationBackward` on the buffers widened to Double, then rounds the results to float32.
    public func activationBackward(_ a: Activation, _ g: ActivationGeometry, input: DeviceBuffer, output: DeviceBuffer,
                                   outputGradient: DeviceBuffer, inputGradient: DeviceBuffer) throws {
        let x = try read(input, count: g.count, "\(a) input")
        let y = try read(output, count: g.count, "\(a) output")
        let dy = try read(outputGradient, count: g.count, "\(a) output gradient")
        try write(try Reference.activationBackward(a, g, input: x, output: y, outputGradient: dy),
                  to: inputGradient, "\(a) input gradient")
    }

    // MARK: Pooling

    /// Runs `Reference.poolingForward` on the buffers widened to Double, then rounds the results to float32.
    public func poolingForward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        let x = try read(input, count: g.inputShape.count, "pooling input")
        try write(try Reference.poolingForward(g, input: x), to: output, "pooling output")
    }

    /// Runs `Reference.poolingBackward` on the buffers widened to Double, then rounds the results to float32.
    public func poolingBackward(_ g: PoolGeometry, input: DeviceBuffer, output: DeviceBuffer,
                                outputGradient: DeviceBuffer, inputGradient: DeviceBuffer) throws {
        let x = try read(input, count: g.inputShape.count, "pooling input")
        _ = try read(output, count: g.outputShape.count, "pooling output")  // not needed: max recomputes from x
        let dy = try read(outputGradient, count: g.outputShape.count, "pooling output gradient")
        try write(try Reference.poolingBackward(g, input: x, outputGradient: dy), to: inputGradient, "pooling input gradient")
    }

    // MARK: Concat

    /// Runs `Reference.concatForward` on the buffers widened to Double, then rounds the results to float32.
    public func concatForward(_ inputs: [DeviceBuffer], channels: [Int], batch: Int, spatial: Int, output: DeviceBuffer) throws {
        try Reference.requireConcat(inputs.count, channels: channels, batch: batch, spatial: spatial)
        let xs = try inputs.enumerated().map { i, b in try read(b, count: batch * channels[i] * spatial, "concat input \(i)") }
        try write(try Reference.concatForward(xs, channels: channels, batch: batch, spatial: spatial), to: output, "concat output")
    }

    /// Runs `Reference.concatBackward` on the buffers widened to Double, then rounds the results to float32.
    public func concatBackward(_ outputGradient: DeviceBuffer, channels: [Int], batch: Int, spatial: Int,
                               inputGradients: [DeviceBuffer]) throws {
        try Reference.requireConcat(inputGradients.count, channels: channels, batch: batch, spatial: spatial)
        let dy = try read(outputGradient, count: batch * channels.reduce(0, +) * spatial, "concat output gradient")
        let dxs = try Reference.concatBackward(dy, channels: channels, batch: batch, spatial: spatial)
        for (i, dx) in dxs.enumerated() { try write(dx, to: inputGradients[i], "concat input gradient \(i)") }
    }

    // MARK: Softmax and losses

    /// Runs `Reference.softmaxForward` on the buffers widened to Double, then rounds the results to float32.
    public func softmaxForward(_ g: SoftmaxGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        let x = try read(input, count: g.count, "softmax input")
        try write(try Reference.softmaxForward(g, input: x), to: output, "softmax output")
    }

    /// Runs `Reference.softmaxBackward` on the buffers widened to Double, then rounds the results to float32.
    public func softmaxBackward(_ g: SoftmaxGeometry, output: DeviceBuffer, outputGradient: DeviceBuffer,
                                inputGradient: DeviceBuffer) throws {
        let y = try read(output, count: g.count, "softmax output")
        let dy = try read(outputGradient, count: g.count, "softmax output gradient")
        try write(try Reference.softmaxBackward(g, output: y, outputGradient: dy), to: inputGradient, "softmax input gradient")
    }

    /// Runs `Reference.softmaxCrossEntropy` on the buffers widened to Double, then rounds the results to float32.
    public func softmaxCrossEntropy(_ g: SoftmaxGeometry, logits: DeviceBuffer, labels: DeviceBuffer, loss: DeviceBuffer,
                                    logitsGradient: DeviceBuffer?, correct: DeviceBuffer?) throws {
        let z = try read(logits, count: g.count, "cross-entropy logits")
        let t = try read(labels, count: g.batch, "cross-entropy labels")
        let result = try Reference.softmaxCrossEntropy(g, logits: z, labels: t)
        try write([result.loss], to: loss, "cross-entropy loss")
        if let logitsGradient { try write(result.logitsGradient, to: logitsGradient, "cross-entropy logits gradient") }
        if let correct { try write([Double(result.correct)], to: correct, "cross-entropy correct count") }
    }

    /// Runs `Reference.meanSquaredError` on the buffers widened to Double, then rounds the results to float32.
    public func meanSquaredError(count: Int, input: DeviceBuffer, target: DeviceBuffer, loss: DeviceBuffer,
                                 inputGradient: DeviceBuffer?) throws {
        let x = try read(input, count: count, "mean squared error input")
        let t = try read(target, count: count, "mean squared error target")
        let result = try Reference.meanSquaredError(input: x, target: t)
        try write([result.loss], to: loss, "mean squared error loss")
        if let inputGradient { try write(result.inputGradient, to: inputGradient, "mean squared error input gradient") }
    }

    // MARK: Frozen layers and element-wise ops

    /// Runs `Reference.channelAffine` on the buffers widened to Double, then rounds the results to float32.
    public func channelAffine(_ shape: Shape, input: DeviceBuffer, scale: DeviceBuffer, shift: DeviceBuffer,
                              output: DeviceBuffer) throws {
        let x = try read(input, count: shape.count, "channel affine input")
        let s = try read(scale, count: shape.c, "channel affine scale")
        let t = try read(shift, count: shape.c, "channel affine shift")
        try write(try Reference.channelAffine(shape, input: x, scale: s, shift: t), to: output, "channel affine output")
    }

    /// Runs `Reference.pixelsToFloat` (Double), then rounds the results to float32.
    public func uploadPixels(_ pixels: UnsafeBufferPointer<UInt8>, shape: Shape, scale: DeviceBuffer?, shift: DeviceBuffer?,
                             to output: DeviceBuffer) throws {
        try checkPixels(pixels, shape: shape, scale: scale, shift: shift, output: output)
        let s = try scale.map { try read($0, count: shape.c, "pixel upload scale") }
        let t = try shift.map { try read($0, count: shape.c, "pixel upload shift") }
        try write(try Reference.pixelsToFloat(shape, pixels: Array(pixels), scale: s, shift: t), to: output, "pixel upload output")
    }

    /// Runs `Reference.channelAffineBackward` on the buffers widened to Double, then rounds the results to float32.
    public func channelAffineBackward(_ shape: Shape, outputGradient: DeviceBuffer, scale: DeviceBuffer,
                                      inputGradient: DeviceBuffer) throws {
        let dy = try read(outputGradient, count: shape.count, "channel affine output gradient")
        let s = try read(scale, count: shape.c, "channel affine scale")
        try write(try Reference.channelAffineBackward(shape, outputGradient: dy, scale: s),
                  to: inputGradient, "channel affine input gradient")
    }

    /// Runs `Reference.elementwise` on the buffers widened to Double, then rounds the results to float32.
    public func elementwise(_ op: ElementwiseOp, _ a: DeviceBuffer, _ b: DeviceBuffer, output: DeviceBuffer, count: Int) throws {
        let x = try read(a, count: count, "element-wise first operand")
        let y = try read(b, count: count, "element-wise second operand")
        try write(try Reference.elementwise(op, x, y), to: output, "element-wise output")
    }

    // MARK: Optimizers

    /// Runs `Reference.sgdStep` on the buffers widened to Double, then rounds the results to float32.
    public func sgdStep(_ h: SGDHyperparameters, parameter: DeviceBuffer, gradient: DeviceBuffer,
                        velocity: DeviceBuffer, count: Int) throws {
        var w = try read(parameter, count: count, "SGD parameter")
        let g = try read(gradient, count: count, "SGD gradient")
        var v = try read(velocity, count: count, "SGD velocity")
        try Reference.sgdStep(h, parameter: &w, gradient: g, velocity: &v)
        try write(w, to: parameter, "SGD parameter")
        try write(v, to: velocity, "SGD velocity")
    }

    /// Runs `Reference.adamStep` on the buffers widened to Double, then rounds the results to float32.
    public func adamStep(_ h: AdamHyperparameters, step: Int, parameter: DeviceBuffer, gradient: DeviceBuffer,
                         m: DeviceBuffer, v: DeviceBuffer, count: Int) throws {
        var w = try read(parameter, count: count, "Adam parameter")
        let g = try read(gradient, count: count, "Adam gradient")
        var m1 = try read(m, count: count, "Adam first moment")
        var m2 = try read(v, count: count, "Adam second moment")
        try Reference.adamStep(h, step: step, parameter: &w, gradient: g, m: &m1, v: &m2)
        try write(w, to: parameter, "Adam parameter")
        try write(m1, to: m, "Adam first moment")
        try write(m2, to: v, "Adam second moment")
    }

    /// An optimizer's `ElementwiseUpdate` by its Double definition.
    public func elementwiseStep(_ update: ElementwiseUpdate, parameter: DeviceBuffer, gradient: DeviceBuffer,
                                state: [DeviceBuffer], scalars: [Double], count: Int) throws {
        var w = try read(parameter, count: count, "\(update.name) parameter")
        let g = try read(gradient, count: count, "\(update.name) gradient")
        var s = try zip(state, update.state).map { try read($0, count: count, "\(update.name) \($1)") }
        update.reference(&w, g, &s, scalars)
        try write(w, to: parameter, "\(update.name) parameter")
        for (values, (buffer, name)) in zip(s, zip(state, update.state)) { try write(values, to: buffer, "\(update.name) \(name)") }
    }
}
