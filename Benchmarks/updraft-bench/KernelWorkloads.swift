import Foundation
import Updraft

/// One timed kernel workload: an op with its buffers, the op description's cost, and a closure that
/// enqueues it once. Buffers are allocated by `prepare` and released when the returned closure goes.
struct KernelWorkload {
    var layer: String
    var op: String
    var shape: String
    var cost: OpCost
    /// The GEMM-shaped ops it runs (empty for the gather): where CLBlast can run one, both engines are timed.
    var shapes: [KernelShape] = []
    var prepare: (OpenCLBackend) throws -> () throws -> Void

    var clblastCan: Bool { shapes.contains { $0.clblastCan } }
}

/// The benchmark's workloads: SqueezeNet 1.1's convolutions and fullyconnected0 (from the project's
/// own model builder, so the shapes are the ones training runs) in each direction, a square SGEMM and
/// conv10's GEMM at the anchor's shape (M = 1000, N = 169 x batch, K = 512).
enum KernelWorkloads {
    /// The convolution and inner-product layers of SqueezeNet 1.1 at 227x227, 10 classes.
    static func squeezeNetLayers() throws -> [GraphLayer] {
        let graph = try NetworkGraph(model: SqueezeNet.build(SqueezeNet.Options(classes: 10)))
        return graph.layers.filter {
            if case .convolution = $0.op { return true }
            if case .innerProduct = $0.op { return true }
            return false
        }
    }

    /// The layers a --quick run keeps: a pointwise and a 3x3 convolution, conv10 and the classifier
    /// (conv1's stride-2 gradient is left to the checks: its input gradient, which training never needs,
    /// takes seconds per run on PoCL).
    static let quickLayers: Set<String> = ["fire2/squeeze1x1", "fire2/expand3x3", "conv10", "fullyconnected0"]

    static func workloads(layers: [GraphLayer], batch: Int, gemmSide: Int) throws -> [KernelWorkload] {
        var out: [KernelWorkload] = []
        for layer in layers {
            if let g = try layer.convolutionGeometry(batch: batch) { out += convolution(layer.name, g) }
            if let g = try layer.innerProductGeometry(batch: batch) { out += innerProduct(layer.name, g) }
        }
        if let conv10 = layers.first(where: { $0.name == "conv10" }), let g = try conv10.convolutionGeometry(batch: batch) {
            out.append(cacheGather(rowLength: g.inputShape.count / max(1, batch), batch: batch))
            out.append(cacheGather(rowLength: g.inputShape.count / max(1, batch), batch: batch, half: true))
        }
        out.append(gemm("sgemm", GemmOperation(m: gemmSide, n: gemmSide, k: gemmSide)))
        out.append(gemm("conv10 GEMM", GemmOperation(m: 1000, n: 169 * batch, k: 512)))
        return out
    }

    static func describe(_ g: ConvGeometry) -> String {
        var s = "\(g.inputShape) → \(g.outChannels) k\(g.kernelH)x\(g.kernelW)"
        if g.strideH != 1 || g.strideW != 1 { s += " s\(g.strideH)" }
        if g.padTop + g.padLeft + g.padBottom + g.padRight > 0 { s += " p\(g.padTop)" }
        return s
    }

    static func convolution(_ name: String, _ g: ConvGeometry) -> [KernelWorkload] {
        let shape = describe(g)
        func buffers(_ cl: OpenCLBackend) throws -> (x: DeviceBuffer, w: DeviceBuffer, b: DeviceBuffer?, y: DeviceBuffer) {
            (try filled(cl, g.inputShape.count, 0.5), try filled(cl, g.weightShape.count, 0.01),
             g.hasBias ? try filled(cl, g.outChannels, 0.1) : nil, try filled(cl, g.outputShape.count, 0.25))
        }
        return [
            KernelWorkload(layer: name, op: "forward", shape: shape + " +relu", cost: g.forwardCost,
                           shapes: [KernelShape(g, .convForward, fusedReLU: true)]) { cl in
                let (x, w, b, y) = try buffers(cl)
                return { try cl.convolutionForward(g, input: x, weights: w, bias: b, output: y, fusedReLU: true) }
            },
            KernelWorkload(layer: name, op: "backward data", shape: shape, cost: g.backwardDataCost,
                           shapes: [KernelShape(g, .convBackwardData)]) { cl in
                let (x, w, _, dy) = try buffers(cl)
                return { try cl.convolutionBackwardData(g, outputGradient: dy, weights: w, inputGradient: x) }
            },
            KernelWorkload(layer: name, op: "backward weights", shape: shape, cost: g.backwardWeightsCost,
                           shapes: [KernelShape(g, .convBackwardWeights)]) { cl in
                let (x, w, b, dy) = try buffers(cl)
                return { try cl.convolutionBackwardWeights(g, input: x, outputGradient: dy, weightGradient: w, biasGradient: b) }
            },
        ]
    }

    static func innerProduct(_ name: String, _ g: InnerProductGeometry) -> [KernelWorkload] {
        let shape = "[\(g.batch), \(g.inputChannels)] → \(g.outputChannels)"
        var forward = GemmOperation(m: g.batch, n: g.outputChannels, k: g.inputChannels, transB: true)
        forward.bias = g.hasBias ? .perColumn : .none
        let backward = [KernelShape(GemmOperation(m: g.batch, n: g.inputChannels, k: g.outputChannels)),
                        KernelShape(GemmOperation(m: g.outputChannels, n: g.inputChannels, k: g.batch, transA: true))]
        func buffers(_ cl: OpenCLBackend) throws -> (x: DeviceBuffer, w: DeviceBuffer, b: DeviceBuffer?, y: DeviceBuffer) {
            (try filled(cl, g.batch * g.inputChannels, 0.5), try filled(cl, g.outputChannels * g.inputChannels, 0.01),
             g.hasBias ? try filled(cl, g.outputChannels, 0.1) : nil, try filled(cl, g.batch * g.outputChannels, 0.25))
        }
        return [
            KernelWorkload(layer: name, op: "forward", shape: shape, cost: g.forwardCost, shapes: [KernelShape(forward)]) { cl in
                let (x, w, b, y) = try buffers(cl)
                return { try cl.innerProductForward(g, input: x, weights: w, bias: b, output: y) }
            },
            // The op description costs both gradients together, so they are timed together.
            KernelWorkload(layer: name, op: "backward data+weights", shape: shape, cost: g.backwardCost, shapes: backward) { cl in
                let (x, w, b, dy) = try buffers(cl)
                let dx = try filled(cl, g.batch * g.inputChannels, 0), dw = try filled(cl, g.outputChannels * g.inputChannels, 0)
                let db = try b.map { _ in try filled(cl, g.outputChannels, 0) }
                return {
                    try cl.innerProductBackwardData(g, outputGradient: dy, weights: w, inputGradient: dx)
                    try cl.innerProductBackwardWeights(g, input: x, outputGradient: dy, weightGradient: dw, biasGradient: db)
                }
            },
        ]
    }

    static func gemm(_ name: String, _ op: GemmOperation) -> KernelWorkload {
        KernelWorkload(layer: name, op: "gemm", shape: "M=\(op.m) N=\(op.n) K=\(op.k)", cost: op.cost, shapes: [KernelShape(op)]) { cl in
            let a = try filled(cl, op.m * op.k, 0.5), b = try filled(cl, op.k * op.n, 0.01), c = try filled(cl, op.m * op.n, 0)
            return { try cl.sgemm(op, a: a, b: b, c: c) }
        }
    }

    /// The feature cache's per-step gather: a batch of conv10 inputs from scattered slots of an
    /// arena four batches long (one `copyRows`; bytes = rows read + rows written).
    /// `half`: from an fp16 arena (`--feature-cache-fp16`), converted to floats on the way (bytes = halves
    /// read + floats written).
    static func cacheGather(rowLength: Int, batch: Int, half: Bool = false) -> KernelWorkload {
        let arenaRows = 4 * batch
        let slots = (0..<batch).map { ($0 * 7 + 3) % arenaRows }
        return KernelWorkload(layer: "feature cache", op: half ? "gather fp16" : "gather",
                              shape: "\(batch) rows of \(rowLength) from \(arenaRows)",
                              cost: OpCost(flops: 0, bytes: Double(batch * rowLength * (half ? 6 : 8)))) { cl in
            let arena = try filled(cl, half ? (arenaRows * rowLength + 1) / 2 : arenaRows * rowLength, 0.5)
            let out = try filled(cl, batch * rowLength, 0)
            if half {
                return { try cl.copyRows(arena, rows: slots, to: out, rows: Array(0..<batch), rowLength: rowLength, toHalf: false) }
            }
            return { try cl.copyRows(arena, rows: slots, to: out, rows: Array(0..<batch), rowLength: rowLength) }
        }
    }

    /// A buffer of `count` copies of `value` (timings do not depend on the values; no denormals).
    static func filled(_ cl: OpenCLBackend, _ count: Int, _ value: Float) throws -> DeviceBuffer {
        let b = try cl.makeBuffer(count: count)
        try cl.fill(b, with: value)
        return b
    }
}

/// Kernel time of one workload: the sum of its kernels' profiled device times per run.
struct KernelTiming {
    var samples: [Double]            // seconds, one per timed run
    var wallSamples: [Double]        // seconds from enqueue to completion, host clock
    var kernels: [OpenCLLaunchRecord]
    var kernelSeconds: [Double]      // per kernel of the last run

    var median: Double { Self.median(samples) }
    var wallMedian: Double { Self.median(wallSamples) }

    static func median(_ values: [Double]) -> Double {
        let s = values.sorted()
        guard !s.isEmpty else { return .nan }
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }

    /// Runs `body` `warmup` times (builds programs, settles clocks), then `runs` times, recorded.
    static func measure(_ cl: OpenCLBackend, runs: Int, warmup: Int, _ body: () throws -> Void) throws -> KernelTiming {
        for _ in 0..<warmup { try body() }
        try cl.synchronize()
        var samples: [Double] = [], wall: [Double] = [], last: [OpenCLLaunchRecord] = [], lastSeconds: [Double] = []
        for _ in 0..<max(1, runs) {
            let start = DispatchTime.now().uptimeNanoseconds
            let records = try cl.recordLaunches(body)
            try cl.synchronize()
            wall.append(Double(DispatchTime.now().uptimeNanoseconds - start) * 1e-9)
            lastSeconds = try records.map { try $0.event.elapsedSeconds() }
            samples.append(lastSeconds.reduce(0, +))
            last = records
        }
        return KernelTiming(samples: samples, wallSamples: wall, kernels: last, kernelSeconds: lastSeconds)
    }
}

/// The device's measured ceilings: FMA throughput and copy bandwidth, measured now with the
/// scheduler's calibration kernels (Kernels/calibrate.cl, best of several runs), not read from a cache.
struct DevicePeak {
    var gflops: Double
    var gbps: Double

    static func measure(_ cl: OpenCLBackend) throws -> DevicePeak {
        let profile = try DeviceCalibration.measure(cl.context.device)
        return DevicePeak(gflops: profile.fmaGFLOPS, gbps: profile.bandwidthGBps)
    }
}
