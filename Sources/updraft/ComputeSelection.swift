import Foundation
import Updraft
import UpdraftCommandLine

/// The `--compute-units` and `--device` options shared by train, evaluate and predict.
let computeOptions: [OptionSpec] = [
    OptionSpec("compute-units", value: "U", help: "cpuOnly, cpuAndGPU or all (default \(ComputeUnits.default.rawValue), as Core ML)"),
    OptionSpec("device", value: "NAME|INDEX", help: "pin a device: an index or name from `updraft devices`, or cpu (also UPDRAFT_DEVICE)"),
]

/// `--data-parallel`, for train only: evaluation and prediction run on one device.
let dataParallelOption = OptionSpec(
    "data-parallel", value: "auto|on|off",
    help: "split each mini-batch across devices: auto (when it pays, under --compute-units all), on, off "
        + "(also \(DataParallelMode.environmentVariable))")

/// Where to run, with the warnings of any fallback taken.
struct ComputeChoice {
    var prefix: Backend
    var tail: Backend
    /// Data-parallel replicas (two or more) and their shares of a mini-batch, or empty.
    var replicas: [Backend] = []
    var shares: [Double] = []
    var warnings: [String]
    var description: String
}

/// Asks the scheduler where to run (calibrated devices, the cost model, pins, fallback, and for
/// training data parallelism).
func chooseBackends(_ args: ParsedArguments, graph: NetworkGraph, batchSize: Int, dataParallel: Bool = false) throws -> ComputeChoice {
    let units = try args.choice("compute-units", ComputeUnits.choices).flatMap(ComputeUnits.init(rawValue:)) ?? .default
    let mode = dataParallel ? args.value("data-parallel") : "off"
    let s = try Scheduler.schedule(graph: graph, batchSize: batchSize, computeUnits: units, deviceOption: args.value("device"),
                                   dataParallel: mode)
    return ComputeChoice(prefix: s.backends.prefix, tail: s.backends.tail, replicas: s.backends.replicas,
                         shares: s.backends.shares, warnings: s.warnings.map { "warning: \($0)" }, description: s.description)
}
