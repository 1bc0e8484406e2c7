import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft-bench cpu-conv`: the CPU backend's convolution forward pass (or, with `--pass
/// backward-data` / `backward-weights`, a gradient) on the 3x3 stride-1 layers of SqueezeNet 1.1 and
/// ResNet-18 (with `--all-layers`, every convolution of both), with each algorithm (im2col + SGEMM,
/// Winograd F(2x2, 3x3), Winograd F(4x4, 3x3), oneDNN), interleaved repetition by repetition so that
/// load on the machine hits all alike; the best time of each is kept; "-" where an algorithm does not
/// run the shape (the own path runs instead). Checks first: every output must agree with im2col's to
/// 1e-4 of the largest output; the column "chosen" names what the backend picks by itself (the stored
/// tuning, else the built-in rule).
let cpuConvolutionCommand = CLICommand(CommandSpec(
    name: "cpu-conv",
    summary: "time the CPU convolution algorithms (im2col, Winograd 2x2 and 4x4, oneDNN) on SqueezeNet's and ResNet-18's layers",
    options: [
        OptionSpec("batch", value: "N", help: "images per call (default 64)"),
        OptionSpec("repeats", value: "R", help: "timed calls per algorithm and layer; the best is kept (default 5)"),
        OptionSpec("threads", value: "T", help: "CPU backend threads (default: the cores)"),
        OptionSpec("pass", value: "forward|backward-data|backward-weights", help: "which pass to time (default forward)"),
        OptionSpec("all-layers", help: "every convolution of SqueezeNet 1.1 and ResNet-18, not only the 3x3 stride-1 ones"),
        OptionSpec("cpu-time", help: "with --threads 1: count the thread's CPU time, not wall time (steadier on a loaded machine)"),
        OptionSpec("only", value: "TEXT", help: "only the layers whose name contains TEXT (e.g. resnet18, fire2, @14)"),
        OptionSpec("json", help: "print JSON"),
    ]
)) { args in
    let batch = try args.int("batch") ?? 64, repeats = try args.int("repeats") ?? 5
    guard batch > 0, repeats > 0 else { throw UsageError("--batch and --repeats must be positive") }
    guard let pass = CPUConvolutionPass(rawValue: args.value("pass") ?? "forward") else {
        throw UsageError("--pass must be forward, backward-data or backward-weights, not \(args.value("pass") ?? "")")
    }
    let backend = CPUBackend(threads: try args.int("threads"))
    let cpuTime = args.flag("cpu-time")
    guard !cpuTime || backend.threadCount == 1 else { throw UsageError("--cpu-time needs --threads 1 (other threads' time is not counted)") }
    func now() -> Double {
        guard cpuTime else { return Double(DispatchTime.now().uptimeNanoseconds) / 1e6 }
        var t = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
        return Double(t.tv_sec) * 1e3 + Double(t.tv_nsec) / 1e6
    }
    let layers = try cpuConvolutionBenchLayers(batch: batch, all: args.flag("all-layers"))
        .filter { args.value("only").map($0.0.contains) ?? true }
    let algorithms = CPUConvolutionAlgorithm.allCases
    let short: [CPUConvolutionAlgorithm: String] = [.im2col: "  im2col", .winograd: " wino2x2", .winograd4x4: " wino4x4", .onednn: "  oneDNN", .direct: "  direct"]
    var rows: [[String: Any]] = []
    print("CPU convolution \(pass.rawValue), batch \(batch), \(backend.threadCount) threads, best of \(repeats) (\(cpuTime ? "CPU " : "")ms; GFLOP/s counts direct convolution's work); oneDNN \(OneDNN.version ?? "unavailable: " + (OneDNN.unavailableReason ?? ""))")
    print("layer                          shape                          " + algorithms.map { (short[$0] ?? $0.rawValue).padding(toLength: 9, withPad: " ", startingAt: 0) }.joined()
          + "chosen        speed-up  best GFLOP/s  oneDNN implementation")
    var totals: [CPUConvolutionAlgorithm: Double] = [:]
    var chosenTotal = 0.0
    for (name, g) in layers {
        let x = try backend.makeBuffer(Tensor(shape: g.inputShape, uniformIn: 0...1, seed: 1))
        let dy = try backend.makeBuffer(Tensor(shape: g.outputShape, uniformIn: -1...1, seed: 4))
        let w = try backend.makeBuffer(Tensor(shape: g.weightShape, uniformIn: -0.1...0.1, seed: 2))
        let b = try backend.makeBuffer(Tensor(shape: [g.outChannels], uniformIn: -0.1...0.1, seed: 3))
        let db = try backend.makeBuffer(count: g.outChannels)
        let y = try backend.makeBuffer(count: [.forward: g.outputShape.count, .backwardData: g.inputShape.count,
                                               .backwardWeights: g.weightShape.count][pass]!)
        func call() throws {
            switch pass {
            case .forward: try backend.convolutionForward(g, input: x, weights: w, bias: g.hasBias ? b : nil, output: y, epilogue: .relu)
            case .backwardData: try backend.convolutionBackwardData(g, outputGradient: dy, weights: w, inputGradient: y)
            case .backwardWeights:
                try backend.convolutionBackwardWeights(g, input: x, outputGradient: dy, weightGradient: y, biasGradient: g.hasBias ? db : nil)
            }
        }
        backend.convolutionAlgorithmOverride = nil
        let chosen = backend.algorithm(for: g, pass)
        var outputs: [CPUConvolutionAlgorithm: [Float]] = [:]
        var best: [CPUConvolutionAlgorithm: Double] = [:]
        var runs: Set<CPUConvolutionAlgorithm> = []
        for a in algorithms {
            backend.convolutionAlgorithmOverride = a
            if backend.canRun(a, g, pass) { runs.insert(a) }
            try call()
            outputs[a] = try backend.download(y)
        }
        let reference = outputs[.im2col] ?? []
        let scale = max(reference.map(abs).max() ?? 1, 1e-30)
        var differences: [String: Double] = [:]
        for a in algorithms where a != .im2col {
            let difference = zip(reference, outputs[a] ?? []).map { abs($0 - $1) }.max() ?? 0
            guard difference <= 1e-4 * scale else {
                printError("\(name): \(a.rawValue) and im2col differ by \(difference) (largest output \(scale))")
                return 1
            }
            differences[a.rawValue] = Double(difference / scale)
        }
        for _ in 0..<repeats {
            for a in algorithms where runs.contains(a) {
                backend.convolutionAlgorithmOverride = a
                let start = now()
                try call()
                let ms = now() - start
                best[a] = min(best[a] ?? .infinity, ms)
            }
        }
        backend.convolutionAlgorithmOverride = nil
        // Where an algorithm does not run the shape, im2col (the own path) does.
        for a in algorithms { totals[a, default: 0] += best[a] ?? best[.im2col] ?? 0 }
        chosenTotal += best[chosen] ?? best[.im2col] ?? 0
        let fastest = best.values.min() ?? 1
        let gflop = [CPUConvolutionPass.forward: g.forwardCost, .backwardData: g.backwardDataCost,
                     .backwardWeights: g.backwardWeightsCost][pass]!.flops / 1e9
        print(name.padding(toLength: 31, withPad: " ", startingAt: 0)
              + KernelWorkloads.describe(g).padding(toLength: 31, withPad: " ", startingAt: 0)
              + algorithms.map { a in best[a].map { String(format: "%8.1f ", $0) } ?? "       - " }.joined()
              + chosen.rawValue.padding(toLength: 13, withPad: " ", startingAt: 0)
              + String(format: "%6.2fx   %6.0f        ", (best[.im2col] ?? 0) / (best[chosen] ?? 1), gflop / fastest * 1e3)
              + (runs.contains(.onednn) ? backend.oneDNNImplementation(g, pass) ?? "" : "-"))
        var row: [String: Any] = ["layer": name, "shape": KernelWorkloads.describe(g), "gflop": gflop, "chosen": chosen.rawValue,
                                  "max_relative_difference": differences,
                                  "onednn_implementation": backend.oneDNNImplementation(g, pass) ?? ""]
        for a in algorithms { if let ms = best[a] { row[a.rawValue + "_ms"] = ms } }
        rows.append(row)
    }
    print("all layers: " + algorithms.map { String(format: "%@ %.1f ms", $0.rawValue, totals[$0] ?? 0) }.joined(separator: ", ")
          + String(format: ", as chosen %.1f ms: %.2fx im2col", chosenTotal, (totals[.im2col] ?? 0) / max(chosenTotal, 1e-9)))
    if args.flag("json") {
        let data = try JSONSerialization.data(withJSONObject: ["batch": batch, "threads": backend.threadCount, "pass": pass.rawValue,
                                                               "onednn": OneDNN.version ?? "", "layers": rows],
                                              options: [.prettyPrinted, .sortedKeys])
        print(String(decoding: data, as: UTF8.self))
    }
    return 0
}

/// SqueezeNet 1.1's and ResNet-18's convolution layers at `batch`: the 3x3 stride-1 ones, or with
/// `all` every one (ResNet-18's as its distinct shapes: the stem, each stage's 3x3, its stride-2 3x3
/// and 1x1 downsample).
func cpuConvolutionBenchLayers(batch: Int, all: Bool) throws -> [(String, ConvGeometry)] {
    var layers: [(String, ConvGeometry)] = []
    for layer in try KernelWorkloads.squeezeNetLayers() {
        if let g = try layer.convolutionGeometry(batch: batch), all || (g.kernelH == 3 && g.strideH == 1) {
            layers.append(("squeezenet " + layer.name, g))
        }
    }
    func conv(_ cin: Int, _ cout: Int, _ k: Int, _ stride: Int, _ pad: Int, _ side: Int) throws -> ConvGeometry {
        try ConvolutionSpec(inputChannels: cin, outputChannels: cout, kernelH: k, kernelW: k, strideH: stride, strideW: stride,
                            padding: .valid(top: pad, bottom: pad, left: pad, right: pad), hasBias: false)
            .geometry(input: [batch, cin, side, side])
    }
    if all { layers.append(("resnet18 conv1", try conv(3, 64, 7, 2, 3, 224))) }
    for (channels, side) in [(64, 56), (128, 28), (256, 14), (512, 7)] {
        let spec = ConvolutionSpec(inputChannels: channels, outputChannels: channels, kernelH: 3, kernelW: 3,
                                   padding: .valid(top: 1, bottom: 1, left: 1, right: 1))
        layers.append(("resnet18 \(channels)@\(side)", try spec.geometry(input: [batch, channels, side, side])))
        if all && channels > 64 {
            layers.append(("resnet18 \(channels)@\(side) /2", try conv(channels / 2, channels, 3, 2, 1, side * 2)))
            layers.append(("resnet18 \(channels)@\(side) down", try conv(channels / 2, channels, 1, 2, 0, side * 2)))
        }
    }
    return layers
}
