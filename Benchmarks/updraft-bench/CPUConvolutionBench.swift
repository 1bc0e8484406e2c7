import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft-bench cpu-conv`: the CPU backend's convolution forward pass (or, with `--pass
/// backward-data`, the input gradient) on the 3x3 stride-1 layers of SqueezeNet 1.1 and ResNet-18, with
/// each algorithm (im2col + SGEMM, Winograd F(2x2, 3x3), Winograd F(4x4, 3x3)), interleaved repetition
/// by repetition so that load on the machine hits all alike; the best time of each is kept. Checks
/// first: every output must agree with im2col's to 1e-4 of the largest output; the column "chosen"
/// names what the backend picks by itself.
let cpuConvolutionCommand = CLICommand(CommandSpec(
    name: "cpu-conv",
    summary: "time the CPU convolution algorithms (im2col, Winograd 2x2 and 4x4) on SqueezeNet's and ResNet-18's 3x3 layers",
    options: [
        OptionSpec("batch", value: "N", help: "images per call (default 64)"),
        OptionSpec("repeats", value: "R", help: "timed calls per algorithm and layer; the best is kept (default 5)"),
        OptionSpec("threads", value: "T", help: "CPU backend threads (default: the cores)"),
        OptionSpec("pass", value: "forward|backward-data", help: "which pass to time (default forward)"),
        OptionSpec("cpu-time", help: "with --threads 1: count the thread's CPU time, not wall time (steadier on a loaded machine)"),
        OptionSpec("json", help: "print JSON"),
    ]
)) { args in
    let batch = try args.int("batch") ?? 64, repeats = try args.int("repeats") ?? 5
    guard batch > 0, repeats > 0 else { throw UsageError("--batch and --repeats must be positive") }
    let pass = args.value("pass") ?? "forward"
    guard pass == "forward" || pass == "backward-data" else { throw UsageError("--pass must be forward or backward-data, not \(pass)") }
    let backend = CPUBackend(threads: try args.int("threads"))
    let cpuTime = args.flag("cpu-time")
    guard !cpuTime || backend.threadCount == 1 else { throw UsageError("--cpu-time needs --threads 1 (other threads' time is not counted)") }
    func now() -> Double {
        guard cpuTime else { return Double(DispatchTime.now().uptimeNanoseconds) / 1e6 }
        var t = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
        return Double(t.tv_sec) * 1e3 + Double(t.tv_nsec) / 1e6
    }
    var layers: [(String, ConvGeometry)] = []
    for layer in try KernelWorkloads.squeezeNetLayers() {
        if let g = try layer.convolutionGeometry(batch: batch), g.kernelH == 3, g.strideH == 1 {
            layers.append(("squeezenet " + layer.name, g))
        }
    }
    for (channels, side) in [(64, 56), (128, 28), (256, 14), (512, 7)] {
        let spec = ConvolutionSpec(inputChannels: channels, outputChannels: channels, kernelH: 3, kernelW: 3,
                                   padding: .valid(top: 1, bottom: 1, left: 1, right: 1))
        layers.append(("resnet18 \(channels)@\(side)", try spec.geometry(input: [batch, channels, side, side])))
    }
    let algorithms = CPUConvolutionAlgorithm.allCases
    var rows: [[String: Any]] = []
    print("CPU convolution \(pass), batch \(batch), \(backend.threadCount) threads, best of \(repeats) (\(cpuTime ? "CPU " : "")ms; GFLOP/s counts direct convolution's work)")
    print("layer                          shape                              im2col  wino2x2  wino4x4  chosen        speed-up   GFLOP/s (im2col / 2x2 / 4x4)")
    var totals: [CPUConvolutionAlgorithm: Double] = [:]
    var chosenTotal = 0.0
    for (name, g) in layers {
        let x = try backend.makeBuffer(Tensor(shape: g.inputShape, uniformIn: 0...1, seed: 1))
        let dy = try backend.makeBuffer(Tensor(shape: g.outputShape, uniformIn: -1...1, seed: 4))
        let w = try backend.makeBuffer(Tensor(shape: g.weightShape, uniformIn: -0.1...0.1, seed: 2))
        let b = try backend.makeBuffer(Tensor(shape: [g.outChannels], uniformIn: -0.1...0.1, seed: 3))
        let y = try backend.makeBuffer(count: pass == "forward" ? g.outputShape.count : g.inputShape.count)
        func call() throws {
            if pass == "forward" {
                try backend.convolutionForward(g, input: x, weights: w, bias: b, output: y, epilogue: .relu)
            } else {
                try backend.convolutionBackwardData(g, outputGradient: dy, weights: w, inputGradient: y)
            }
        }
        backend.convolutionAlgorithmOverride = nil
        let chosen = pass == "forward" ? backend.forwardAlgorithm(for: g) : backend.backwardDataAlgorithm(for: g)
        var outputs: [CPUConvolutionAlgorithm: [Float]] = [:]
        var best: [CPUConvolutionAlgorithm: Double] = [:]
        for algorithm in algorithms {
            backend.convolutionAlgorithmOverride = algorithm
            try call()
            outputs[algorithm] = try backend.download(y)
        }
        let reference = outputs[.im2col] ?? []
        let scale = max(reference.map(abs).max() ?? 1, 1e-30)
        var differences: [String: Double] = [:]
        for algorithm in algorithms where algorithm != .im2col {
            let difference = zip(reference, outputs[algorithm] ?? []).map { abs($0 - $1) }.max() ?? 0
            guard difference <= 1e-4 * scale else {
                printError("\(name): \(algorithm.rawValue) and im2col differ by \(difference) (largest output \(scale))")
                return 1
            }
            differences[algorithm.rawValue] = Double(difference / scale)
        }
        for _ in 0..<repeats {
            for algorithm in algorithms {
                backend.convolutionAlgorithmOverride = algorithm
                let start = now()
                try call()
                let ms = now() - start
                best[algorithm] = min(best[algorithm] ?? .infinity, ms)
            }
        }
        backend.convolutionAlgorithmOverride = nil
        for algorithm in algorithms { totals[algorithm, default: 0] += best[algorithm] ?? 0 }
        chosenTotal += best[chosen] ?? 0
        let ms = algorithms.map { best[$0] ?? 0 }
        let gflop = (pass == "forward" ? g.forwardCost : g.backwardDataCost).flops / 1e9
        print(name.padding(toLength: 31, withPad: " ", startingAt: 0)
              + KernelWorkloads.describe(g).padding(toLength: 32, withPad: " ", startingAt: 0)
              + String(format: "%8.1f %8.1f %8.1f  ", ms[0], ms[1], ms[2])
              + chosen.rawValue.padding(toLength: 13, withPad: " ", startingAt: 0)
              + String(format: "%6.2fx   %4.0f / %4.0f / %4.0f", ms[0] / (best[chosen] ?? 1),
                       gflop / ms[0] * 1e3, gflop / ms[1] * 1e3, gflop / ms[2] * 1e3))
        var row: [String: Any] = ["layer": name, "shape": KernelWorkloads.describe(g), "gflop": gflop, "chosen": chosen.rawValue,
                                  "max_relative_difference": differences]
        for algorithm in algorithms { row[algorithm.rawValue + "_ms"] = best[algorithm] ?? 0 }
        rows.append(row)
    }
    let t = algorithms.map { totals[$0] ?? 0 }
    print(String(format: "all layers: im2col %.1f ms, Winograd 2x2 %.1f ms, Winograd 4x4 %.1f ms, as chosen %.1f ms: %.2fx im2col",
                 t[0], t[1], t[2], chosenTotal, t[0] / max(chosenTotal, 1e-9)))
    if args.flag("json") {
        let data = try JSONSerialization.data(withJSONObject: ["batch": batch, "threads": backend.threadCount, "pass": pass,
                                                               "layers": rows], options: [.prettyPrinted, .sortedKeys])
        print(String(decoding: data, as: UTF8.self))
    }
    return 0
}
