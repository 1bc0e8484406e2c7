import Foundation
import Updraft
import UpdraftCommandLine

let kernelsCommand = CLICommand(CommandSpec(
    name: "kernels",
    summary: "Check the OpenCL GEMM, convolution and inner-product kernels against the reference, then time them.",
    options: OptionSpec.table("""
        --quick         a small run: batch 1, four layers, a 256^3 SGEMM, one warm-up (seconds on PoCL once its kernel cache is warm)
        --json          print JSON (device, tilings and defines, every timing) instead of a table
        --device INDEX  OpenCL device index as `updraft devices` lists them (default: the first GPU, else 0)
        --batch N       batch size of the layer timings (default 64; 1 with --quick)
        --runs N        timed runs per workload after the warm-ups; the median is reported (default 7; 3 with --quick)
        """),
    discussion: """
    First every kernel is compared with the Double reference (BackendComparison): the shared awkward-size
    cases for convolution and inner product, each benchmarked layer at batch 1, and the SGEMM variants
    timed. Any mismatch stops the run (exit status 1) before anything is timed.

    Then the device's own ceilings are measured (FMA throughput and copy bandwidth, with the
    scheduler's calibration kernels in Kernels/calibrate.cl) and each workload is timed with OpenCL
    profiling events (kernel time, summed over the kernels an op launches): SqueezeNet 1.1's
    convolutions (forward with fused ReLU, backward data, backward weights and bias) and
    fullyconnected0 (forward, both gradients) at the batch size, a square SGEMM (4096^3) and conv10's
    GEMM at the anchor's shape (M=1000, N=169 x batch, K=512). FLOPs and bytes come from the op
    descriptions (ConvGeometry.forwardCost, ...).
    """
)) { args in
    try KernelsBenchmark(args).run()
}

/// `updraft-bench kernels`: correctness first, then timings, printed as a table or JSON.
struct KernelsBenchmark {
    var quick: Bool
    var json: Bool
    var deviceIndex: Int?
    var batch: Int
    var runs: Int

    init(_ args: ParsedArguments) throws {
        quick = args.flag("quick")
        json = args.flag("json")
        deviceIndex = try args.int("device")
        batch = try args.int("batch") ?? (quick ? 1 : 64)
        runs = try args.int("runs") ?? (quick ? 3 : 7)
        guard batch >= 1 else { throw UsageError("--batch must be at least 1") }
        guard runs >= 1 else { throw UsageError("--runs must be at least 1") }
    }

    func run() throws -> Int32 {
        let cl = try openBackend()
        var layers = try KernelWorkloads.squeezeNetLayers()
        if quick { layers = layers.filter { KernelWorkloads.quickLayers.contains($0.name) } }
        let gemmSide = quick ? 256 : 4096
        log("device: \(cl.device.name) (\(cl.device.platformName)), \(cl.device.computeUnits) compute units")

        // 1. Correctness, before anything is timed.
        log("checking the kernels against the reference…")
        let checks = try checkRows(cl, layers: layers, gemmSide: min(gemmSide, 256))
        let failures = checks.filter { !$0.ok }
        if !failures.isEmpty {
            if json { try printJSON(cl, checks: checks, peak: nil, results: []) }
            printError("updraft-bench kernels: \(failures.count) of \(checks.count) checks failed; nothing was timed\n"
                       + ComparisonRow.table(failures))
            return 1
        }
        log("\(checks.count) checks passed")

        // 2. The device's ceilings, then every workload.
        let peak = try DevicePeak.measure(cl)
        log(String(format: "measured peak: %.1f GFLOP/s (FMA), %.1f GB/s (copy)", peak.gflops, peak.gbps))
        var results: [(KernelWorkload, KernelTiming)] = []
        var engineTimings: [[String: KernelTiming]] = []
        let engines = engineBackends(cl)
        for w in try KernelWorkloads.workloads(layers: layers, batch: batch, gemmSide: gemmSide) {
            log("timing \(w.layer) \(w.op)…")
            let body = try w.prepare(cl)
            results.append((w, try KernelTiming.measure(cl, runs: runs, warmup: quick ? 1 : 2, body)))
            // Where CLBlast can run it, each engine on its own as well (the chosen run above is one of them).
            var timings: [String: KernelTiming] = [:]
            if w.clblastCan {
                for (engine, backend) in engines {
                    let body = try w.prepare(backend)
                    timings[engine.rawValue] = try KernelTiming.measure(backend, runs: runs, warmup: quick ? 1 : 2, body)
                }
            }
            engineTimings.append(timings)
        }
        if json {
            try printJSON(cl, checks: checks, peak: peak, results: results, engines: engineTimings)
        } else {
            printTable(cl, peak: peak, results: results, engines: engineTimings)
        }
        return 0
    }

    /// The backend as loaded (table plus stored tuning) with only its in-house choices, and one that
    /// runs CLBlast wherever it can: the two engines side by side.
    private func engineBackends(_ cl: OpenCLBackend) -> [(KernelVariant.Engine, OpenCLBackend)] {
        var inHouse = cl.tuning
        inHouse.tuned = inHouse.tuned.filter { $0.value.engine == .inHouse }
        var clblast = cl.tuning
        clblast.forced = .clblast
        return [(.inHouse, OpenCLBackend(context: cl.context, tuning: inHouse)),
                (.clblast, OpenCLBackend(context: cl.context, tuning: clblast))]
    }

    /// The engine the chosen run used, and the variant per shape (the tuned one, else the table's).
    private func choice(_ cl: OpenCLBackend, _ w: KernelWorkload, _ t: KernelTiming) -> (engine: String, variants: [String]) {
        let engine = t.kernels.contains { $0.kernel == "clblast_sgemm" } ? KernelVariant.Engine.clblast : .inHouse
        return (engine.rawValue, w.shapes.map { cl.tuning.variant(for: $0).map { "\($0)" } ?? "table" })
    }

    private func openBackend() throws -> OpenCLBackend {
        let devices = try OpenCLRuntime.devices()
        guard !devices.isEmpty else {
            throw UpdraftError(.device, "no OpenCL device found",
                               hint: OpenCLRuntime.availability ?? "install pocl-opencl-icd or a GPU driver's OpenCL ICD")
        }
        let device: OpenCLDevice
        if let index = deviceIndex {
            guard let d = devices.first(where: { $0.info.index == index }) else {
                throw UsageError("--device \(index) does not exist; `updraft devices` lists 0...\(devices.count - 1)")
            }
            device = d
        } else {
            device = devices.first { $0.info.type == .gpu } ?? devices[0]
        }
        return try OpenCLBackend(device: device)
    }

    private func log(_ message: String) { if !json { printError(message) } }

    // MARK: Checks

    /// BackendComparison rows for the shared convolution / inner-product cases and every benchmarked
    /// layer at batch 1, plus SGEMM rows (the square variant and conv10's GEMM at batch 1) against a loop.
    private func checkRows(_ cl: OpenCLBackend, layers: [GraphLayer], gemmSide: Int) throws -> [ComparisonRow] {
        var cases = [OpCase].full.filter { $0.op == "convolution" || $0.op == "innerProduct" }
        for layer in layers {
            let input = layer.inputShape.withBatch(1)
            switch layer.op {
            case let .convolution(spec):
                cases.append(OpCase(.convolution(spec, input: input, epilogue: .relu), name: "\(layer.name) \(input)"))
            case let .innerProduct(spec):
                cases.append(OpCase(.innerProduct(spec, input: layer.inputShape.withBatch(3), epilogue: nil), name: "\(layer.name) batch 3"))
            default: break
            }
        }
        var rows = BackendComparison(backend: cl).run(cases)
        rows.append(try checkGemm(cl, GemmOperation(m: gemmSide, n: gemmSide, k: gemmSide), "sgemm \(gemmSide)^3"))
        rows.append(try checkGemm(cl, GemmOperation(m: 1000, n: 169, k: 512), "conv10 GEMM at batch 1"))
        return rows
    }

    private func checkGemm(_ cl: OpenCLBackend, _ op: GemmOperation, _ name: String) throws -> ComparisonRow {
        var rng = SplitMix64(seed: 42)
        let a = (0..<(op.m * op.k)).map { _ in rng.nextFloat(in: -1...1) }
        let b = (0..<(op.k * op.n)).map { _ in rng.nextFloat(in: -1...1) }
        let c = try cl.makeBuffer([Float](repeating: BackendComparison.sentinel, count: op.m * op.n))
        do {
            try cl.sgemm(op, a: try cl.makeBuffer(a), b: try cl.makeBuffer(b), c: c)
        } catch {
            return .failure(op: "sgemm", caseName: name, error)
        }
        var want = [Double](repeating: 0, count: op.m * op.n)
        a.withUnsafeBufferPointer { a in
            b.withUnsafeBufferPointer { b in
                for i in 0..<op.m {
                    for p in 0..<op.k {
                        let av = Double(a[i * op.k + p])
                        for j in 0..<op.n { want[i * op.n + j] += av * Double(b[p * op.n + j]) }
                    }
                }
            }
        }
        let got = try cl.download(c).map(Double.init)
        return ComparisonRow(op: "sgemm", caseName: name, quantity: "C",
                             error: ComparisonError(got: got, reference: want, tolerance: .float32))
    }

    // MARK: Output

    /// "128x128x16 8x8" for the GEMM kernel of a launch list (" u4": k unroll, " global": no local
    /// staging), plus how many other kernels ran.
    private func tilingSummary(_ t: KernelTiming) -> String {
        guard let main = t.kernels.first(where: { $0.defines["TM"] != nil }) else { return "-" }
        let d = main.defines
        var s = "\(d["TM"] ?? "?")x\(d["TN"] ?? "?")x\(d["TK"] ?? "?") \(d["WPTM"] ?? "?")x\(d["WPTN"] ?? "?")"
        if let u = d["KUNROLL"] { s += " u\(u)" }
        if d["STAGE_LOCAL"] == "0" { s += " global" }
        if d["GEMM_EXACT"] == "1" { s += " exact" }
        if t.kernels.count > 1 { s += " +\(t.kernels.count - 1)" }
        return s
    }

    private func printTable(_ cl: OpenCLBackend, peak: DevicePeak, results: [(KernelWorkload, KernelTiming)],
                            engines: [[String: KernelTiming]]) {
        print("Kernels on \(cl.device.name) (\(cl.device.platformName), \(cl.device.driverVersion)), batch \(batch), "
              + "median of \(runs) runs, kernel time from profiling events")
        print(String(format: "measured peak: %.1f GFLOP/s FMA, %.1f GB/s copy", peak.gflops, peak.gbps))
        print("")
        var rows = [["layer", "op", "shape", "ms", "GFLOP/s", "GB/s", "% FMA peak", "% copy BW", "tiling", "engine",
                     "in-house wall ms", "CLBlast wall ms"]]
        for (i, (w, t)) in results.enumerated() {
            let s = t.median
            let e = engines[i]
            func wall(_ engine: KernelVariant.Engine) -> String {
                e[engine.rawValue].map { String(format: "%.3f", $0.wallMedian * 1e3) } ?? "-"
            }
            rows.append([w.layer, w.op, w.shape, String(format: "%.3f", s * 1e3),
                         String(format: "%.1f", w.cost.flops / s * 1e-9), String(format: "%.1f", w.cost.bytes / s * 1e-9),
                         String(format: "%.1f", 100 * w.cost.flops / s * 1e-9 / peak.gflops),
                         String(format: "%.1f", 100 * w.cost.bytes / s * 1e-9 / peak.gbps), tilingSummary(t),
                         choice(cl, w, t).engine, wall(.inHouse), wall(.clblast)])
        }
        print(formatTable(rows, rightAligned: [3, 4, 5, 6, 7, 10, 11]), terminator: "")
        print("")
        for (label, s) in summary(results) {
            print(String(format: "%@: %.3f ms, %.1f GFLOP/s (%.1f%% of FMA peak)", label, s.seconds * 1e3,
                         s.flops / s.seconds * 1e-9, 100 * s.flops / s.seconds * 1e-9 / peak.gflops))
        }
    }

    /// Totals over groups of rows: the network's convolutions forward, and one fine-tuning step's
    /// trained layers (conv10 forward and weight gradient, fullyconnected0 forward and backward).
    private func summary(_ results: [(KernelWorkload, KernelTiming)]) -> [(String, (seconds: Double, flops: Double))] {
        func total(_ keep: (KernelWorkload) -> Bool) -> (seconds: Double, flops: Double) {
            results.filter { keep($0.0) }.reduce((0, 0)) { ($0.0 + $1.1.median, $0.1 + $1.0.cost.flops) }
        }
        let isLayer: (KernelWorkload) -> Bool = { $0.op != "gemm" }
        var out = [("convolutions forward at batch \(batch)",
                    total { isLayer($0) && $0.layer != "fullyconnected0" && $0.op == "forward" })]
        let trained = total { ($0.layer == "conv10" && ($0.op == "forward" || $0.op == "backward weights"))
            || ($0.layer == "fullyconnected0") }
        if trained.flops > 0 { out.append(("trained layers (conv10 fwd + dW, fullyconnected0 fwd + bwd)", trained)) }
        return out
    }

    private func printJSON(_ cl: OpenCLBackend, checks: [ComparisonRow], peak: DevicePeak?,
                           results: [(KernelWorkload, KernelTiming)], engines: [[String: KernelTiming]] = []) throws {
        let info = cl.device
        var root: [String: Any] = [
            "device": ["name": info.name, "vendor": info.vendor, "platform": info.platformName,
                       "platformVersion": info.platformVersion, "driver": info.driverVersion, "type": info.type.rawValue,
                       "computeUnits": info.computeUnits, "clockMHz": info.clockMHz, "localMemoryBytes": info.localMemory,
                       "maxWorkGroupSize": info.maxWorkGroupSize, "openCLC": info.openCLCVersion, "index": info.index],
            "tuning": ["workGroupSize": cl.tuning.workGroupSize, "groupsPerComputeUnit": cl.tuning.groupsPerComputeUnit,
                       "gemmTilings": cl.tuning.gemmTilings.map { $0.defines },
                       "tunedShapeClasses": cl.tuning.tuned.mapValues { "\($0)" },
                       "tunedSource": cl.tuning.tunedSource ?? NSNull()] as [String: Any],
            "batch": batch, "runs": runs, "quick": quick, "buildOptions": cl.context.baseBuildOptions,
            "cpuVectorLevel": CPUVectorLevel.active.description,
            "checks": ["passed": checks.filter(\.ok).count, "failed": checks.filter { !$0.ok }.count,
                       "rows": checks.map { ["op": $0.op, "case": $0.caseName, "quantity": $0.quantity,
                                             "maxAbsError": finite($0.maxAbsError), "maxRelError": finite($0.maxRelError),
                                             "ok": $0.ok, "note": $0.note ?? NSNull()] as [String: Any] }],
        ]
        if let peak {
            root["peak"] = ["fmaGFLOPs": peak.gflops, "copyGBs": peak.gbps, "source": "DeviceCalibration (Kernels/calibrate.cl)"]
            root["results"] = results.enumerated().map { i, r -> [String: Any] in
                let (w, t) = r
                let s = t.median
                let chosen = choice(cl, w, t)
                let engineTimes: [String: Any] = (i < engines.count ? engines[i] : [:]).mapValues { e in
                    ["ms": e.median * 1e3, "wallMs": e.wallMedian * 1e3, "gflops": w.cost.flops / e.median * 1e-9,
                     "wallGflops": w.cost.flops / e.wallMedian * 1e-9] as [String: Any]
                }
                return ["engine": chosen.engine, "variants": chosen.variants, "engines": engineTimes,
                        "gemmShapes": w.shapes.map { ["shape": $0.description, "class": $0.classKey, "clblastCan": $0.clblastCan] as [String: Any] },"layer": w.layer, "op": w.op, "shape": w.shape, "flops": w.cost.flops, "bytes": w.cost.bytes,
                        "ms": s * 1e3, "wallMs": t.wallMedian * 1e3, "samplesMs": t.samples.map { $0 * 1e3 },
                        "gflops": w.cost.flops / s * 1e-9, "gbs": w.cost.bytes / s * 1e-9,
                        "fractionOfPeakFlops": w.cost.flops / s * 1e-9 / peak.gflops,
                        "fractionOfPeakBandwidth": w.cost.bytes / s * 1e-9 / peak.gbps,
                        "kernels": zip(t.kernels, t.kernelSeconds).map { k, sec in
                            ["name": k.kernel, "defines": k.defines, "global": k.global, "local": k.local, "ms": sec * 1e3] as [String: Any]
                        }]
            }
            root["summary"] = summary(results).map { label, s in
                ["what": label, "ms": s.seconds * 1e3, "gflops": s.flops / s.seconds * 1e-9,
                 "fractionOfPeakFlops": s.flops / s.seconds * 1e-9 / peak.gflops] as [String: Any]
            }
        }
        let data = try JSONSerialization.data(withJSONObject: root, options: [.prettyPrinted, .sortedKeys])
        print(String(decoding: data, as: UTF8.self))
    }

    private func finite(_ v: Double) -> Any { v.isFinite ? v : NSNull() }
}
