import UpdraftCore

/// Runs op cases on any `Backend` and on `Reference`, with the same seeded float32 data, and
/// compares every result: forward outputs, every gradient, losses, correct counts and optimizer
/// states. This is how the OpenCL and optimized CPU backends are tested:
///
///     let rows = BackendComparison(backend: myBackend).run(.full)
///     XCTAssert(rows.allSatisfy(\.ok), ComparisonRow.table(rows.filter { !$0.ok }))
///
/// Each backward op is fed the reference's forward results (rounded to float32) where it needs
/// them, so a row measures one kernel, not the errors of the one before it. Output buffers are
/// filled with a sentinel before each op, so a kernel that accumulates instead of writing, or
/// leaves elements unwritten, fails. A backend that throws yields one failed row ("error") naming
/// the error; the other cases still run.
public struct BackendComparison {
    /// The backend under test; every result it produces is compared with `Reference`.
    public var backend: Backend
    /// Tolerance for values computed in float32 (see `Tolerance`); copies and counts must match exactly.
    public var tolerance: Tolerance
    /// Mixed into every case's seed, to rerun the same cases on other data.
    public var seed: UInt64

    /// A comparison of `backend` with the reference; tolerance `.float32` and seed 0 by default.
    public init(backend: Backend, tolerance: Tolerance = .float32, seed: UInt64 = 0) {
        self.backend = backend; self.tolerance = tolerance; self.seed = seed
    }

    /// Value written into output buffers before an op runs.
    public static let sentinel: Float = 7.25

    /// Rows for every case whose op name contains `filter` (case-insensitive; nil or "" runs all).
    public func run(_ cases: [OpCase], only filter: String? = nil) -> [ComparisonRow] {
        cases.filter { $0.matches(filter) }.flatMap { run($0) }
    }

    /// The rows of one case: one per compared quantity.
    public func run(_ c: OpCase) -> [ComparisonRow] {
        var session = ComparisonSession(backend: backend, case: c, tolerance: tolerance, seed: seed)
        do {
            try session.compare()
        } catch {
            session.rows.append(.failure(op: c.op, caseName: c.name, error))
        }
        return session.rows
    }
}

/// The state of one case's comparison: the data source, the backend and the rows so far.
struct ComparisonSession {
    let backend: Backend
    let opCase: OpCase
    let tolerance: Tolerance
    var rng: SplitMix64
    var rows: [ComparisonRow] = []

    init(backend: Backend, case c: OpCase, tolerance: Tolerance, seed: UInt64) {
        self.backend = backend; self.opCase = c; self.tolerance = tolerance
        self.rng = SplitMix64(seed: c.seed(seed))
    }

    // MARK: Data and buffers

    /// `count` float32 values: uniform in `range`, or coarse (-1, -0.5, 0, 0.5, 1) for `.coarse` cases.
    mutating func values(_ count: Int, _ range: ClosedRange<Float> = -1...1) -> [Float] {
        switch opCase.values {
        case .uniform: return (0..<count).map { _ in rng.nextFloat(in: range) }
        case .coarse: return (0..<count).map { _ in Float(Int(rng.next() % 5) - 2) / 2 }
        }
    }

    /// Class indices in 0..<classes, as floats.
    mutating func labels(_ count: Int, classes: Int) -> [Float] {
        (0..<count).map { _ in Float(rng.next() % UInt64(max(classes, 1))) }
    }

    func upload(_ values: [Float]) throws -> DeviceBuffer { try backend.makeBuffer(values) }
    /// An output buffer, pre-filled with the sentinel.
    func output(_ count: Int) throws -> DeviceBuffer {
        try backend.makeBuffer([Float](repeating: BackendComparison.sentinel, count: count))
    }
    func download(_ buffer: DeviceBuffer) throws -> [Double] { try backend.download(buffer).map(Double.init) }

    mutating func record(_ quantity: String, _ buffer: DeviceBuffer, _ reference: [Double],
                         tolerance: Tolerance? = nil) throws {
        record(quantity, try download(buffer), reference, tolerance: tolerance)
    }

    mutating func record(_ quantity: String, _ got: [Double], _ reference: [Double], tolerance: Tolerance? = nil) {
        rows.append(ComparisonRow(op: opCase.op, caseName: opCase.name, quantity: quantity,
                                  error: ComparisonError(got: got, reference: reference,
                                                         tolerance: tolerance ?? self.tolerance)))
    }
}

/// Float32 data as the reference sees it.
func asDouble(_ values: [Float]) -> [Double] { values.map(Double.init) }
/// Reference results as a backend would receive them.
func asFloat(_ values: [Double]) -> [Float] { values.map(Float.init) }

extension ComparisonSession {
    mutating func compare() throws {
        switch opCase.kind {
        case let .memory(count): try compareMemory(count)
        case let .convolution(spec, input, epilogue): try compareConvolution(try spec.geometry(input: input), epilogue)
        case let .innerProduct(spec, input, epilogue): try compareInnerProduct(try spec.geometry(input: input), epilogue)
        case let .activation(a, g): try compareActivation(a, g)
        case let .pooling(spec, input): try comparePooling(try spec.geometry(input: input))
        case let .concat(channels, batch, spatial): try compareConcat(channels, batch, spatial)
        case let .softmax(g): try compareSoftmax(g)
        case let .softmaxCrossEntropy(batch, classes): try compareCrossEntropy(batch, classes)
        case let .meanSquaredError(count): try compareMeanSquaredError(count)
        case let .channelAffine(shape): try compareChannelAffine(shape)
        case let .elementwise(op, count): try compareElementwise(op, count)
        case let .sgd(h, count, steps): try compareSGD(h, count, steps)
        case let .adam(h, count, steps): try compareAdam(h, count, steps)
        case let .spatial(op, input): try compareSpatial(try op.geometry(input: input))
        case let .broadcast(g): try compareBroadcast(g)
        case let .reduction(g): try compareReduction(g)
        case let .layout(op, batch): try compareLayout(op, batch: batch)
        }
    }

    mutating func compareMemory(_ count: Int) throws {
        let a = values(count), b = values(count), tail: [Float] = [1, 2, 3]
        let buffer = try upload(a)
        record("upload/download", try download(buffer), asDouble(a), tolerance: .exact)
        try backend.fill(buffer, with: 0.25)
        record("fill", try download(buffer), [Double](repeating: 0.25, count: count), tolerance: .exact)
        // copy and accumulate touch only the first source.count elements of a larger destination
        let source = try upload(a), destination = try upload(b + tail)
        try backend.copy(source, to: destination)
        record("copy", try download(destination), asDouble(a + tail), tolerance: .exact)
        let sum = try upload(b + tail)
        try backend.accumulate(source, into: sum)
        record("accumulate", try download(sum), zip(a, b).map { Double($0) + Double($1) } + asDouble(tail))
    }

    mutating func compareConvolution(_ g: ConvGeometry, _ epilogue: Activation?) throws {
        let x = values(g.inputShape.count), w = values(g.weightShape.count)
        let b = g.hasBias ? values(g.outChannels) : nil, dy = values(g.outputShape.count)
        let xb = try upload(x), wb = try upload(w), bb = try b.map(upload), dyb = try upload(dy)
        let y = try output(g.outputShape.count)
        try backend.convolutionForward(g, input: xb, weights: wb, bias: bb, output: y, epilogue: epilogue)
        try record("y", y, Reference.convolutionForward(g, input: asDouble(x), weights: asDouble(w), bias: b.map(asDouble), epilogue: epilogue))

        let dx = try output(g.inputShape.count)
        try backend.convolutionBackwardData(g, outputGradient: dyb, weights: wb, inputGradient: dx)
        try record("dx", dx, Reference.convolutionBackwardData(g, outputGradient: asDouble(dy), weights: asDouble(w)))

        let dw = try output(g.weightShape.count), db = g.hasBias ? try output(g.outChannels) : nil
        try backend.convolutionBackwardWeights(g, input: xb, outputGradient: dyb, weightGradient: dw, biasGradient: db)
        let reference = try Reference.convolutionBackwardWeights(g, input: asDouble(x), outputGradient: asDouble(dy))
        try record("dw", dw, reference.weights)
        if let db { try record("db", db, reference.bias) }
    }

    mutating func compareInnerProduct(_ g: InnerProductGeometry, _ epilogue: Activation?) throws {
        let x = values(g.batch * g.inputChannels), w = values(g.outputChannels * g.inputChannels)
        let b = g.hasBias ? values(g.outputChannels) : nil, dy = values(g.batch * g.outputChannels)
        let xb = try upload(x), wb = try upload(w), bb = try b.map(upload), dyb = try upload(dy)
        let y = try output(g.batch * g.outputChannels)
        try backend.innerProductForward(g, input: xb, weights: wb, bias: bb, output: y, epilogue: epilogue)
        try record("y", y, Reference.innerProductForward(g, input: asDouble(x), weights: asDouble(w), bias: b.map(asDouble),
                                                         epilogue: epilogue))

        let dx = try output(g.batch * g.inputChannels)
        try backend.innerProductBackwardData(g, outputGradient: dyb, weights: wb, inputGradient: dx)
        try record("dx", dx, Reference.innerProductBackwardData(g, outputGradient: asDouble(dy), weights: asDouble(w)))

        let dw = try output(g.outputChannels * g.inputChannels), db = g.hasBias ? try output(g.outputChannels) : nil
        try backend.innerProductBackwardWeights(g, input: xb, outputGradient: dyb, weightGradient: dw, biasGradient: db)
        let reference = try Reference.innerProductBackwardWeights(g, input: asDouble(x), outputGradient: asDouble(dy))
        try record("dw", dw, reference.weights)
        if let db { try record("db", db, reference.bias) }
    }

    mutating func compareActivation(_ a: Activation, _ g: ActivationGeometry) throws {
        let r = a.verificationRange(wide: true)
        let count = g.count, x = values(count, Float(r.lowerBound)...Float(r.upperBound)), dy = values(count)
        let xb = try upload(x), y = try output(count)
        try backend.activationForward(a, g, input: xb, output: y)
        let yRef = try Reference.activationForward(a, g, input: asDouble(x))
        try record("y", y, yRef)

        let dx = try output(count)
        try backend.activationBackward(a, g, input: xb, output: try upload(asFloat(yRef)), outputGradient: try upload(dy),
                                       inputGradient: dx)
        try record("dx", dx, Reference.activationBackward(a, g, input: asDouble(x), output: asDouble(asFloat(yRef)),
                                                          outputGradient: asDouble(dy)))
    }

    mutating func comparePooling(_ g: PoolGeometry) throws {
        let x = values(g.inputShape.count), dy = values(g.outputShape.count)
        let xb = try upload(x), y = try output(g.outputShape.count)
        try backend.poolingForward(g, input: xb, output: y)
        let yRef = try Reference.poolingForward(g, input: asDouble(x))
        try record("y", y, yRef)

        let dx = try output(g.inputShape.count)
        try backend.poolingBackward(g, input: xb, output: try upload(asFloat(yRef)), outputGradient: try upload(dy), inputGradient: dx)
        try record("dx", dx, Reference.poolingBackward(g, input: asDouble(x), outputGradient: asDouble(dy)))
    }

    mutating func compareConcat(_ channels: [Int], _ batch: Int, _ spatial: Int) throws {
        var xs: [[Float]] = []
        for c in channels { xs.append(values(batch * c * spatial)) }
        let total = batch * channels.reduce(0, +) * spatial
        let y = try output(total)
        try backend.concatForward(try xs.map(upload), channels: channels, batch: batch, spatial: spatial, output: y)
        try record("y", y, Reference.concatForward(xs.map(asDouble), channels: channels, batch: batch, spatial: spatial),
                   tolerance: .exact)

        let dy = values(total)
        let dxs = try channels.map { try output(batch * $0 * spatial) }
        try backend.concatBackward(try upload(dy), channels: channels, batch: batch, spatial: spatial, inputGradients: dxs)
        let reference = try Reference.concatBackward(asDouble(dy), channels: channels, batch: batch, spatial: spatial)
        record("dx", try dxs.flatMap(download), reference.flatMap { $0 }, tolerance: .exact)
    }

    mutating func compareSoftmax(_ g: SoftmaxGeometry) throws {
        let x = values(g.count, -4...4), dy = values(g.count)
        let y = try output(g.count)
        try backend.softmaxForward(g, input: try upload(x), output: y)
        let yRef = try Reference.softmaxForward(g, input: asDouble(x))
        try record("y", y, yRef)

        let dx = try output(g.count)
        try backend.softmaxBackward(g, output: try upload(asFloat(yRef)), outputGradient: try upload(dy), inputGradient: dx)
        try record("dx", dx, Reference.softmaxBackward(g, output: asDouble(asFloat(yRef)), outputGradient: asDouble(dy)))
    }

    mutating func compareCrossEntropy(_ batch: Int, _ classes: Int) throws {
        let g = SoftmaxGeometry(batch: batch, channels: classes)
        let z = values(batch * classes, -4...4), labels = labels(batch, classes: classes)
        let loss = try output(1), dz = try output(batch * classes), correct = try output(1)
        try backend.softmaxCrossEntropy(g, logits: try upload(z), labels: try upload(labels), loss: loss,
                                        logitsGradient: dz, correct: correct)
        let reference = try Reference.softmaxCrossEntropy(g, logits: asDouble(z), labels: asDouble(labels))
        try record("loss", loss, [reference.loss])
        try record("dz", dz, reference.logitsGradient)
        try record("correct", correct, [Double(reference.correct)], tolerance: .exact)
        // evaluation passes ask for the loss alone
        let lossOnly = try output(1)
        try backend.softmaxCrossEntropy(g, logits: try upload(z), labels: try upload(labels), loss: lossOnly,
                                        logitsGradient: nil, correct: nil)
        try record("loss alone", lossOnly, [reference.loss])
    }

    mutating func compareMeanSquaredError(_ count: Int) throws {
        let x = values(count), t = values(count)
        let loss = try output(1), dx = try output(count)
        try backend.meanSquaredError(count: count, input: try upload(x), target: try upload(t), loss: loss, inputGradient: dx)
        let reference = try Reference.meanSquaredError(input: asDouble(x), target: asDouble(t))
        try record("loss", loss, [reference.loss])
        try record("dx", dx, reference.inputGradient)
        let lossOnly = try output(1)
        try backend.meanSquaredError(count: count, input: try upload(x), target: try upload(t), loss: lossOnly, inputGradient: nil)
        try record("loss alone", lossOnly, [reference.loss])
    }

    mutating func compareChannelAffine(_ shape: Shape) throws {
        let x = values(shape.count), scale = values(shape.c, 0.5...1.5), shift = values(shape.c), dy = values(shape.count)
        let scaleBuffer = try upload(scale)
        let y = try output(shape.count)
        try backend.channelAffine(shape, input: try upload(x), scale: scaleBuffer, shift: try upload(shift), output: y)
        try record("y", y, Reference.channelAffine(shape, input: asDouble(x), scale: asDouble(scale), shift: asDouble(shift)))

        let dx = try output(shape.count)
        try backend.channelAffineBackward(shape, outputGradient: try upload(dy), scale: scaleBuffer, inputGradient: dx)
        try record("dx", dx, Reference.channelAffineBackward(shape, outputGradient: asDouble(dy), scale: asDouble(scale)))
    }

    mutating func compareElementwise(_ op: ElementwiseOp, _ count: Int) throws {
        let a = values(count), b = values(count)
        let y = try output(count)
        try backend.elementwise(op, try upload(a), try upload(b), output: y, count: count)
        try record("y", y, Reference.elementwise(op, asDouble(a), asDouble(b)))
    }

    /// `steps` steps with a new gradient each step; the reference keeps its state in Double.
    mutating func compareSGD(_ h: SGDHyperparameters, _ count: Int, _ steps: Int) throws {
        let w0 = values(count), v0 = values(count, -0.1...0.1)
        let wb = try upload(w0), vb = try upload(v0)
        var w = asDouble(w0), v = asDouble(v0)
        for _ in 0..<steps {
            let g = values(count)
            try backend.sgdStep(h, parameter: wb, gradient: try upload(g), velocity: vb, count: count)
            try Reference.sgdStep(h, parameter: &w, gradient: asDouble(g), velocity: &v)
        }
        try record("w", wb, w)
        try record("v", vb, v)
    }

    mutating func compareAdam(_ h: AdamHyperparameters, _ count: Int, _ steps: Int) throws {
        let w0 = values(count)
        let zeros = [Float](repeating: 0, count: count)
        let wb = try upload(w0), mb = try upload(zeros), vb = try upload(zeros)
        var w = asDouble(w0), m = asDouble(zeros), v = asDouble(zeros)
        for step in 1...max(steps, 1) {
            let g = values(count)
            try backend.adamStep(h, step: step, parameter: wb, gradient: try upload(g), m: mb, v: vb, count: count)
            try Reference.adamStep(h, step: step, parameter: &w, gradient: asDouble(g), m: &m, v: &v)
        }
        try record("w", wb, w)
        try record("m", mb, m)
        try record("v", vb, v)
    }
}
