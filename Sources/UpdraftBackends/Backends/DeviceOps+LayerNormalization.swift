import UpdraftCore

// Layer normalization on every device (Ops/LayerNormalization.swift): its two ops, each with the fast
// CPU loops (one row per work item, sums in Double), the OpenCL kernels (Kernels/layer_normalization.cl,
// one work-group per row) and the Double reference side by side, and the `Backend` methods that run them.

public extension BackendCall.Kind {
    static let layerNormalizationForward = Self("layerNormalizationForward")
    static let layerNormalizationBackward = Self("layerNormalizationBackward")
}

public extension KernelFamily {
    /// Kernels/layer_normalization.cl.
    static let layerNormalization = KernelFamily("layer_normalization")
}

extension DeviceOps {
    /// y [g.count] = gamma xhat + beta for x [g.count], gamma and beta [g.groupSize].
    public struct LayerNormalizationForward: DeviceOp {
        public let g: LayerNormalizationGeometry, input: DeviceBuffer, gamma: DeviceBuffer, beta: DeviceBuffer, output: DeviceBuffer
        public static var kind: BackendCall.Kind { .layerNormalizationForward }
        public var detail: String { g.description }

        public func run(on b: CPUBackend) throws {
            let p = try g.pointers(on: b, [(input, g.count, "input"), (output, g.count, "output"), (gamma, g.groupSize, "gamma"),
                                           (beta, g.groupSize, "beta")])
            let (x, y, gm, bt, G) = (p[0], p[1], p[2], p[3], g.groupSize)
            b.parallelChunks(g.rows, grain: max(1, CPUParallel.elementGrain / G)) { rows in
                for r in rows {
                    let src = x + r * G, dst = y + r * G
                    let (mean, inv) = layerNormalizationRow(src, G, g.epsilon)
                    for j in 0..<G { dst[j] = gm[j] * (src[j] - mean) * inv + bt[j] }
                }
            }
        }

        public func run(on b: OpenCLBackend) throws {
            try g.launch("layer_norm_forward", on: b, [(input, g.count, "input"), (gamma, g.groupSize, "gamma"),
                                                       (beta, g.groupSize, "beta"), (output, g.count, "output")])
        }

        public func run(on b: ReferenceBackend) throws {
            try g.reference(on: b, [(input, g.count, "input"), (gamma, g.groupSize, "gamma"), (beta, g.groupSize, "beta")],
                            to: (output, g.count, "output")) {
                try Reference.layerNormalizationForward(g, input: $0[0], gamma: $0[1], beta: $0[2])
            }
        }
    }

    /// dx [g.count] from x, the frozen gamma and dy.
    public struct LayerNormalizationBackward: DeviceOp {
        public let g: LayerNormalizationGeometry, input: DeviceBuffer, gamma: DeviceBuffer, outputGradient: DeviceBuffer
        public let inputGradient: DeviceBuffer
        public static var kind: BackendCall.Kind { .layerNormalizationBackward }
        public var detail: String { g.description }

        public func run(on b: CPUBackend) throws {
            let p = try g.pointers(on: b, [(input, g.count, "input"), (gamma, g.groupSize, "gamma"),
                                           (outputGradient, g.count, "output gradient"), (inputGradient, g.count, "input gradient")])
            let (x, gm, dy, dx, G) = (p[0], p[1], p[2], p[3], g.groupSize)
            b.parallelChunks(g.rows, grain: max(1, CPUParallel.elementGrain / G)) { rows in
                for r in rows {
                    let xs = x + r * G, d = dy + r * G, out = dx + r * G
                    let (mean, inv) = layerNormalizationRow(xs, G, g.epsilon)
                    var sumG = 0.0, sumGXhat = 0.0
                    for j in 0..<G {
                        let gj = Double(d[j] * gm[j])
                        sumG += gj
                        sumGXhat += gj * Double((xs[j] - mean) * inv)
                    }
                    let meanG = Float(sumG / Double(G)), meanGXhat = Float(sumGXhat / Double(G))
                    for j in 0..<G { out[j] = inv * (d[j] * gm[j] - meanG - (xs[j] - mean) * inv * meanGXhat) }
                }
            }
        }

        public func run(on b: OpenCLBackend) throws {
            try g.launch("layer_norm_backward", on: b, [(input, g.count, "input"), (gamma, g.groupSize, "gamma"),
                                                        (outputGradient, g.count, "output gradient"),
                                                        (inputGradient, g.count, "input gradient")])
        }

        public func run(on b: ReferenceBackend) throws {
            try g.reference(on: b, [(input, g.count, "input"), (gamma, g.groupSize, "gamma"), (outputGradient, g.count, "output gradient")],
                            to: (inputGradient, g.count, "input gradient")) {
                try Reference.layerNormalizationBackward(g, input: $0[0], gamma: $0[1], outputGradient: $0[2])
            }
        }
    }
}

/// A buffer of a call, the values it must hold, and its name for errors.
private typealias Operand = (buffer: DeviceBuffer, count: Int, name: String)

extension LayerNormalizationGeometry {
    /// The CPU storage of `operands`, each checked to hold its values, after the sizes are checked.
    fileprivate func pointers(on b: CPUBackend, _ operands: [Operand]) throws -> [UnsafeMutablePointer<Float>] {
        try validate()
        return try operands.map { try b.pointer($0.buffer, $0.count, "layer normalization \($0.name) (\(self))") }
    }

    /// The Double reference `body` of `operands`' values, rounded into `result`.
    fileprivate func reference(on b: ReferenceBackend, _ operands: [Operand], to result: Operand,
                               _ body: ([[Double]]) throws -> [Double]) throws {
        let values = try operands.map { try b.read($0.buffer, count: $0.count, "layer normalization \($0.name)") }
        try b.write(try body(values), to: result.buffer, "layer normalization \(result.name)")
    }

    /// Launches `kernel` of layer_normalization.cl, one work-group per row, with `operands` then G and eps.
    fileprivate func launch(_ kernel: String, on b: OpenCLBackend, _ operands: [Operand]) throws {
        try validate()
        try b.requireSizes([("rows", rows), ("group", groupSize)], total: count, op: "layer normalization")
        let k = try b.opsKernel("layer_normalization.cl", kernel)
        let buffers: [KernelArgument] = try operands.map {
            .buffer(try b.operand($0.buffer, holds: $0.count, "layer normalization \($0.name) (\(self))"))
        }
        try k.setArguments(buffers + [.int(groupSize), .float(epsilon)])
        try b.launchGroups(k, groups: rows)
    }
}

/// One row's mean and 1 / sqrt(biased variance + eps), summed in Double.
private func layerNormalizationRow(_ x: UnsafeMutablePointer<Float>, _ G: Int, _ eps: Float) -> (mean: Float, inv: Float) {
    var sum = 0.0, squares = 0.0
    for j in 0..<G { sum += Double(x[j]) }
    let mean = sum / Double(G)
    for j in 0..<G { let d = Double(x[j]) - mean; squares += d * d }
    return (Float(mean), Float(1 / (squares / Double(G) + Double(eps)).squareRoot()))
}

/// These ops as `Backend` methods (each builds its op and `run`s it).
public extension Backend {
    func layerNormalizationForward(_ g: LayerNormalizationGeometry, input: DeviceBuffer, gamma: DeviceBuffer, beta: DeviceBuffer,
                                   output: DeviceBuffer) throws {
        try run(DeviceOps.LayerNormalizationForward(g: g, input: input, gamma: gamma, beta: beta, output: output))
    }
    func layerNormalizationBackward(_ g: LayerNormalizationGeometry, input: DeviceBuffer, gamma: DeviceBuffer,
                                    outputGradient: DeviceBuffer, inputGradient: DeviceBuffer) throws {
        try run(DeviceOps.LayerNormalizationBackward(g: g, input: input, gamma: gamma, outputGradient: outputGradient,
                                                     inputGradient: inputGradient))
    }
}
