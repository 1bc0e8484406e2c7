import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft-bench cpu-conv`: the CPU backend's convolution forward pass on the 3x3 stride-1 layers of
/// SqueezeNet 1.1 and ResNet-18, with each forward algorithm (im2col + SGEMM, Winograd F(2x2, 3x3)),
/// interleaved repetition by repetition so that load on the machine hits both alike; the best time of
/// each is kept. Checks first: the two outputs must agree to 1e-4 of the largest output.
let cpuConvolutionCommand = CLICommand(CommandSpec(
    name: "cpu-conv",
    summary: "time the CPU convolution forward algorithms (im2col, Winograd) on SqueezeNet's and ResNet-18's 3x3 layers",
    options: [
        OptionSpec("batch", value: "N", help: "images per call (default 64)"),
        OptionSpec("repeats", value: "R", help: "timed calls per algorithm and layer; the best is kept (default 5)"),
        OptionSpec("threads", value: "T", help: "CPU backend threads (default: the cores)"),
        OptionSpec("json", help: "print JSON"),
    ]
)) { args in
    let batch = try args.int("batch") ?? 64, repeats = try args.int("repeats") ?? 5
    guard batch > 0, repeats > 0 else { throw UsageError("--batch and --repeats must be positive") }
    let backend = CPUBackend(threads: try args.int("threads"))
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
    var rows: [[String: Any]] = []
    print("CPU convolution forward, batch \(batch), \(backend.threadCount) threads, best of \(repeats) (ms; GFLOP/s counts direct convolution's work)")
    print("layer                          shape                             im2col   winograd  speed-up  max difference")
    var totals = (im2col: 0.0, winograd: 0.0)
    for (name, g) in layers {
        let x = try backend.makeBuffer(Tensor(shape: g.inputShape, uniformIn: 0...1, seed: 1))
        let w = try backend.makeBuffer(Tensor(shape: g.weightShape, uniformIn: -0.1...0.1, seed: 2))
        let b = try backend.makeBuffer(Tensor(shape: [g.outChannels], uniformIn: -0.1...0.1, seed: 3))
        var outputs: [CPUConvolutionAlgorithm: [Float]] = [:]
        var best: [CPUConvolutionAlgorithm: Double] = [:]
        let y = try backend.makeBuffer(count: g.outputShape.count)
        for algorithm in CPUConvolutionAlgorithm.allCases {
            backend.convolutionAlgorithmOverride = algorithm
            try backend.convolutionForward(g, input: x, weights: w, bias: b, output: y, epilogue: .relu)
            outputs[algorithm] = try backend.download(y)
        }
        let reference = outputs[.im2col] ?? [], other = outputs[.winograd] ?? []
        let scale = max(reference.map(abs).max() ?? 1, 1e-30)
        let difference = zip(reference, other).map { abs($0 - $1) }.max() ?? 0
        guard difference <= 1e-4 * scale else {
            printError("\(name): Winograd and im2col differ by \(difference) (largest output \(scale))")
            return 1
        }
        for _ in 0..<repeats {
            for algorithm in CPUConvolutionAlgorithm.allCases {
                backend.convolutionAlgorithmOverride = algorithm
                let start = DispatchTime.now().uptimeNanoseconds
                try backend.convolutionForward(g, input: x, weights: w, bias: b, output: y, epilogue: .relu)
                let ms = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
                best[algorithm] = min(best[algorithm] ?? .infinity, ms)
            }
        }
        let a = best[.im2col] ?? 0, c = best[.winograd] ?? 0
        totals.im2col += a; totals.winograd += c
        let gflop = g.forwardCost.flops / 1e9
        print(name.padding(toLength: 31, withPad: " ", startingAt: 0)
              + KernelWorkloads.describe(g).padding(toLength: 32, withPad: " ", startingAt: 0)
              + String(format: "%8.1f  %9.1f  %7.2fx   %.1e of max", a, c, a / c, difference / scale)
              + String(format: "   (%.0f / %.0f GFLOP/s)", gflop / a * 1e3, gflop / c * 1e3))
        rows.append(["layer": name, "shape": KernelWorkloads.describe(g), "im2col_ms": a, "winograd_ms": c,
                     "speedup": a / c, "gflop": gflop, "max_relative_difference": Double(difference / scale)])
    }
    print(String(format: "all layers: im2col %.1f ms, Winograd %.1f ms: %.2fx", totals.im2col, totals.winograd,
                 totals.im2col / max(totals.winograd, 1e-9)))
    if args.flag("json") {
        let data = try JSONSerialization.data(withJSONObject: ["batch": batch, "threads": backend.threadCount, "layers": rows],
                                              options: [.prettyPrinted, .sortedKeys])
        print(String(decoding: data, as: UTF8.self))
    }
    return 0
}
