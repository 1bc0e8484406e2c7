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
            try g.validate()
            let G = g.groupSize
            let x = try b.pointer(input, g.count, "layer normalization input (\(g))")
            let y = try b.pointer(output, g.count, "layer normalization output (\(g))")
            let gm = try b.pointer(gamma, G, "layer normalization gamma (\(g))")
            let bt = try b.pointer(beta, G, "layer normalization beta (\(g))")
            b.parallelChunks(g.rows, grain: max(1, CPUParallel.elementGrain / G)) { rows in
                for r in rows {
                    let src = x + r * G, dst = y + r * G
                    let (mean, inv) = layerNormalizationRow(src, G, g.epsilon)
                    for j in 0..<G { dst[j] = gm[j] * (src[j] - mean) * inv + bt[j] }
                }
            }
        }

        public func run(on b: OpenCLBackend) throws {
            try g.validate()
            try b.requireSizes([("rows", g.rows), ("group", g.groupSize)], total: g.count, op: "layer normalization")
            let k = try b.opsKernel("layer_normalization.cl", "layer_norm_forward")
            try k.setArguments([.buffer(try b.operand(input, holds: g.count, "layer normalization input (\(g))")),
                                .buffer(try b.operand(gamma, holds: g.groupSize, "layer normalization gamma (\(g))")),
                                .buffer(try b.operand(beta, holds: g.groupSize, "layer normalization beta (\(g))")),
                                .buffer(try b.operand(output, holds: g.count, "layer normalization output (\(g))")),
                                .int(g.groupSize), .float(g.epsilon)])
            try b.launchGroups(k, groups: g.rows)
        }

        public func run(on b: ReferenceBackend) throws {
            let y = try Reference.layerNormalizationForward(
                g, input: b.read(input, count: g.count, "layer normalization input"),
                gamma: b.read(gamma, count: g.groupSize, "layer normalization gamma"),
                beta: b.read(beta, count: g.groupSize, "layer normalization beta"))
            try b.write(y, to: output, "layer normalization output")
        }
    }

    /// dx [g.count] from x, the frozen gamma and dy.
    public struct LayerNormalizationBackward: DeviceOp {
        public let g: LayerNormalizationGeometry, input: DeviceBuffer, gamma: DeviceBuffer, outputGradient: DeviceBuffer
        public let inputGradient: DeviceBuffer
        public static var kind: BackendCall.Kind { .layerNormalizationBackward }
        public var detail: String { g.description }

        public func run(on b: CPUBackend) throws {
            try g.validate()
            let G = g.groupSize
            let x = try b.pointer(input, g.count, "layer normalization input (\(g))")
            let gm = try b.pointer(gamma, G, "layer normalization gamma (\(g))")
            let dy = try b.pointer(outputGradient, g.count, "layer normalization output gradient (\(g))")
            let dx = try b.pointer(inputGradient, g.count, "layer normalization input gradient (\(g))")
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
            try g.validate()
            try b.requireSizes([("rows", g.rows), ("group", g.groupSize)], total: g.count, op: "layer normalization backward")
            let k = try b.opsKernel("layer_normalization.cl", "layer_norm_backward")
            try k.setArguments([.buffer(try b.operand(input, holds: g.count, "layer normalization input (\(g))")),
                                .buffer(try b.operand(gamma, holds: g.groupSize, "layer normalization gamma (\(g))")),
                                .buffer(try b.operand(outputGradient, holds: g.count, "layer normalization output gradient (\(g))")),
                                .buffer(try b.operand(inputGradient, holds: g.count, "layer normalization input gradient (\(g))")),
                                .int(g.groupSize), .float(g.epsilon)])
            try b.launchGroups(k, groups: g.rows)
        }

        public func run(on b: ReferenceBackend) throws {
            let dx = try Reference.layerNormalizationBackward(
                g, input: b.read(input, count: g.count, "layer normalization input"),
                gamma: b.read(gamma, count: g.groupSize, "layer normalization gamma"),
                outputGradient: b.read(outputGradient, count: g.count, "layer normalization output gradient"))
            try b.write(dx, to: inputGradient, "layer normalization input gradient")
        }
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
