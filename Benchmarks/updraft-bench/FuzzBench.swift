import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft-bench fuzz`: mutated models through the reader, the validator and the planner
/// (`ModelFuzzing`), many more than the test suite runs. `make fuzz` runs it in a child process
/// with a virtual-memory limit (`Tests/Scripts/fuzz.sh`): a trap or an allocation past the limit
/// ends the process, a hang is caught by the script's timeout.
let fuzzCommand = CLICommand(CommandSpec(
    name: "fuzz",
    summary: "run mutated models through the reader, validator and planner (no crash, no hang, no disagreement)",
    options: OptionSpec.table("""
        --models N  how many mutated models (default 10000)
        --start I   index of the first (default 0): model I of a seed is always the same
        --seed S    the mutation sequence (default 1)
        --save DIR  write each model that breaks a rule here, as model-<index>.mlmodel
        """)
)) { args in
    let count = try args.int("models") ?? 10_000, start = try args.int("start") ?? 0
    let seed = UInt64(truncatingIfNeeded: try args.int("seed") ?? 1)
    guard count >= 0, start >= 0 else { throw UsageError("--models and --start must not be negative") }
    let seeds = try ModelFuzzing.seedModels()
    var counts: [ModelFuzzing.Outcome: Int] = [:]
    var violations = 0
    var slowest = (seconds: 0.0, index: 0)
    let began = Date()
    for index in start..<start + count {
        let t = Date()
        do {
            counts[try ModelFuzzing.run(index: index, seed: seed, seeds: seeds), default: 0] += 1
        } catch {
            violations += 1
            printError("\(error)")
            if let dir = args.value("save") {
                var mutator = ModelMutator(seed: seed &+ UInt64(index) &* 0x9E37_79B9_7F4A_7C15)
                let bytes = mutator.mutate(seeds[Int(mutator.next() % UInt64(seeds.count))])
                try? Data(bytes).write(to: URL(fileURLWithPath: dir).appendingPathComponent("model-\(index).mlmodel"))
            }
        }
        let seconds = Date().timeIntervalSince(t)
        if seconds > slowest.seconds { slowest = (seconds, index) }
    }
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    let elapsed = Date().timeIntervalSince(began)
    print("models \(start)..<\(start + count) (seed \(seed)): "
          + ModelFuzzing.Outcome.allCases.map { "\($0.rawValue) \(counts[$0] ?? 0)" }.joined(separator: ", ")
          + "; violations \(violations); \(String(format: "%.1f", elapsed)) s"
          + String(format: "; slowest model %d: %.3f s", slowest.index, slowest.seconds)
          + "; peak resident \(formatBytes(UInt64(usage.ru_maxrss) * 1024))")
    return violations == 0 ? 0 : 1
}
