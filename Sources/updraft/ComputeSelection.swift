import Foundation
import Updraft

/// The `--compute-units` and `--device` options shared by train, evaluate and predict.
let computeOptions: [OptionSpec] = [
    OptionSpec("compute-units", value: "U", help: "cpuOnly, cpuAndGPU or all (default cpuAndGPU)"),
    OptionSpec("device", value: "NAME|INDEX", help: "pin a device: an index or name from `updraft devices`, or cpu"),
]

/// Where to run, with the warnings of any fallback taken.
struct ComputeChoice {
    var prefix: Backend
    var tail: Backend
    var warnings: [String]
    var description: String { prefix === tail ? tail.name : "\(prefix.name) (frozen prefix) + \(tail.name) (trained tail)" }
}

func chooseBackends(_ args: ParsedArguments, graph: NetworkGraph, batchSize: Int) throws -> ComputeChoice {
    let units = try args.choice("compute-units", ["cpuOnly", "cpuAndGPU", "all"]) ?? "cpuAndGPU"
    let device = args.value("device") ?? ProcessInfo.processInfo.environment["UPDRAFT_DEVICE"]
    var warnings: [String] = []
    if units == "cpuOnly" || device?.lowercased() == "cpu" {
        let cpu = CPUBackend()
        return ComputeChoice(prefix: cpu, tail: cpu, warnings: warnings)
    }
    let (backends, failures) = OpenCLBackend.all()
    warnings += failures.map { "warning: \($0); falling back" }
    var candidates = backends.filter { units == "all" || $0.device.type == .gpu }
    if let device {
        if let i = Int(device) {
            candidates = backends.filter { $0.device.index == i }
        } else {
            candidates = backends.filter { $0.device.name.lowercased().contains(device.lowercased()) }
        }
        guard !candidates.isEmpty else {
            throw UpdraftError(.invalidArgument, "no device matches '\(device)'",
                               hint: "devices: cpu" + backends.map { ", \($0.device.index) (\($0.device.name))" }.joined())
        }
    }
    if let chosen = candidates.first {
        return ComputeChoice(prefix: chosen, tail: chosen, warnings: warnings)
    }
    if backends.isEmpty {
        warnings.append("warning: \(OpenCLRuntime.availability ?? "no OpenCL device"); training on the CPU")
    }
    let cpu = CPUBackend()
    return ComputeChoice(prefix: cpu, tail: cpu, warnings: warnings)
}
