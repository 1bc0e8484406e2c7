import Foundation
import Updraft
import UpdraftCommandLine

// `updraft-bench`: benchmarks that check correctness first, then time (one subcommand per file here).
let commands: [CLICommand] = [
    kernelsCommand,
    epochsCommand,
    chainCommand,
    fuzzCommand,
    dataCommand,
    cpuConvolutionCommand,
    knnCommand,
    tasksCommand,
    soakCommand,
    firstUseCommand,
]

exit(runCommandLine(program: "updraft-bench",
                    summary: "updraft-bench: measure Updraft's kernels, training epochs and data pipeline.",
                    commands: commands, arguments: Array(CommandLine.arguments.dropFirst()),
                    version: UpdraftVersion.description))
