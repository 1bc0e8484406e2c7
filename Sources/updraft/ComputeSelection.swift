import Foundation
import Updraft
import UpdraftCommandLine

/// The `--compute-units` and `--device` options shared by train, evaluate and predict.
let computeOptions: [OptionSpec] = OptionSpec.table("""
    --compute-units U    cpuOnly, cpuAndGPU or all (default \(ComputeUnits.default.rawValue), as Core ML)
    --device NAME|INDEX  pin a device: an index or name from `updraft devices`, or cpu (also UPDRAFT_DEVICE); under mpirun a list such as 1,0 gives local rank i entry i mod count
    """)

/// `--data-parallel`, for train only: evaluation and prediction run on one device.
let dataParallelOption = OptionSpec(
    "data-parallel", value: "auto|on|off",
    help: "split each mini-batch across devices: auto (when it pays, under --compute-units all), on, off "
        + "(also \(DataParallelMode.environmentVariable))")

/// `--compute-units`, `--device` and, with `dataParallel` (train, plan), `--data-parallel`, into the
/// configuration the library resolves: the options are parsed by the library's own parsers
/// (`ComputeUnits(parsing:)`, `DataParallelMode(parsing:)`, any case); the devices they name are
/// looked up when the run is scheduled. Without `dataParallel` the run stays on one device.
func computeConfiguration(_ args: ParsedArguments, dataParallel: Bool, into config: inout UpdateConfiguration) throws {
    config.placement.computeUnits = try computeUnits(args)
    config.placement.deviceOption = args.value("device")
    config.placement.dataParallelMode = dataParallel ? try dataParallelMode(args) : .off
}

/// `--compute-units`, read by the library's parser (any case); a bad value is a usage error.
func computeUnits(_ args: ParsedArguments) throws -> ComputeUnits {
    try usage("--compute-units") { try args.value("compute-units").map(ComputeUnits.init(parsing:)) } ?? .default
}

/// `--data-parallel`, read by the library's parser (any case), nil when not given (the
/// environment, then auto, decide); a bad value is a usage error.
func dataParallelMode(_ args: ParsedArguments) throws -> DataParallelMode? {
    try usage("--data-parallel") { try args.value("data-parallel").map(DataParallelMode.init(parsing:)) }
}

/// Restates a library parser's error about an option's value as a usage error (status 2, with usage).
private func usage<T>(_ option: String, _ parse: () throws -> T) throws -> T {
    do { return try parse() } catch let e as UpdraftError {
        throw UsageError("\(option): \(e.message)" + (e.hint.map { "; \($0)" } ?? ""))
    }
}

/// Says on standard error how long making the device ready took (`ModelPredictor.prepare`), when it
/// took a second or more: on a cold cache, OpenCL's programs are built there, before the first pass.
func reportPreparation(_ seconds: Double) {
    if seconds >= 1 { printError(String(format: "prepared the device in %.1f s (programs and primitives, before the first pass)", seconds)) }
}
