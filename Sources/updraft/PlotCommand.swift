import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft plot HISTORY.json --out curves.png`: the loss and accuracy curves of a training run.
let plotCommand = CLICommand(
    CommandSpec(
        name: "plot",
        summary: "Draw a training history's loss and accuracy curves as a PNG",
        positionals: "HISTORY.json", minPositionals: 1, maxPositionals: 1,
        options: OptionSpec.table("""
            --out FILE.png   where to write the PNG (default: HISTORY with .png for .json)
            --width PIXELS   image width (default 1200)
            --height PIXELS  image height (default 520)
            """),
        discussion: """
        Reads the history `updraft train` writes next to the trained model (<model>.history.json) and
        draws, as DIGITS does, a loss panel (every mini-batch's loss, the mean training loss and the
        validation loss per epoch) beside an accuracy panel (training and validation accuracy per epoch).
        """),
    run: { args in
        let input = URL(fileURLWithPath: args.positionals[0])
        let out = args.value("out").map { URL(fileURLWithPath: $0) }
            ?? input.deletingPathExtension().appendingPathExtension("png")
        let width = try args.int("width") ?? 1200, height = try args.int("height") ?? 520
        guard (200...8000).contains(width), (150...8000).contains(height) else {
            throw UsageError("--width must be 200...8000 and --height 150...8000 pixels, got \(width)x\(height)")
        }
        let history = try TrainingHistory.read(from: input)
        let png = try HistoryPlot(history: history).png(width: width, height: height)
        try writeAtomically(Data(png), to: out)
        print("wrote \(out.path) (\(history.epochs.count) epochs)")
        return 0
    })
