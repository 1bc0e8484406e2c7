import Foundation
import Updraft

/// The `--compute-units` and `--device` options shared by train, evaluate and predict.
let computeOptions: [OptionSpec] = [
    OptionSpec("compute-units", value: "U", help: "cpuOnly, cpuAndGPU or all (default \(ComputeUnits.default.rawValue), as Core ML)"),
    OptionSpec("device", value: "NAME|INDEX", help: "pin a device: an index or name from `updraft devices`, or cpu (also UPDRAFT_DEVICE)"),
]

/// Where to run, with the warnings of any fallback taken.
struct ComputeChoice {
    var prefix: Backend
    var tail: Backend
    var warnings: [String]
    var description: String { prefix === tail ? tail.name : "\(prefix.name) (frozen prefix) + \(tail.name) (trained tail)" }
}

/// Asks the scheduler where to run (calibrated devices, the cost model, pins, fallback).
func chooseBackends(_ args: ParsedArguments, graph: NetworkGraph, batchSize: Int) throws -> ComputeChoice {
    let units = try args.choice("compute-units", ComputeUnits.choices).flatMap(ComputeUnits.init(rawValue:)) ?? .default
    let s = try Scheduler.schedule(graph: graph, batchSize: batchSize, computeUnits: units, deviceOption: args.value("device"))
    return ComputeChoice(prefix: s.backends.prefix, tail: s.backends.tail, warnings: s.warnings.map { "warning: \($0)" })
}
