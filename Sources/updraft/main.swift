import Foundation
import Updraft
import UpdraftCommandLine

// The `updraft` command: one subcommand per file in this folder, listed here.
let commands: [CLICommand] = [
    devicesCommand,
    cacheCommand,
    planCommand,
    gradcheckCommand,
    createCommand,
    inspectCommand,
    makeUpdatableCommand,
    reinitCommand,
    trainCommand,
    evaluateCommand,
    predictCommand,
    knnCommand,
    tuneCommand,
    plotCommand,
]

exit(runCommandLine(program: "updraft",
                    summary: "updraft: train Core ML updatable models on Linux, on OpenCL devices or the CPU.",
                    commands: commands, arguments: Array(CommandLine.arguments.dropFirst()),
                    version: UpdraftVersion.description))
