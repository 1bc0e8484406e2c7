import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft inspect MODEL.mlmodel [--json]`: what a model is and whether Updraft (and Core ML) can train it.
let inspectCommand = CLICommand(
    CommandSpec(
        name: "inspect",
        summary: "Show a Core ML model's inputs, layers, loss, optimizer and hyperparameters, and check it for training",
        positionals: "MODEL.mlmodel", minPositionals: 1, maxPositionals: 1,
        options: OptionSpec.table("""
            --json    print the report as JSON
            --strict  exit with status 1 when the validator reports errors
            """),
        discussion: """
        Lists inputs, outputs and training inputs; the layers in execution order with their type,
        per-example output shape (channels x height x width), parameter count and updatable flag; the
        loss; the optimizer; every hyperparameter with its default and allowed values; and the
        validator's errors (Core ML or Updraft would refuse) and warnings (Core ML would refuse,
        Updraft can train).
        """),
    run: { args in
        let path = args.positionals[0]
        let model = try CoreMLModel(contentsOf: URL(fileURLWithPath: path))
        let report = ModelKinds.report(model, file: path)
        if args.flag("json") {
            print(try report.json())
        } else {
            print(report.text(), terminator: "")
        }
        if args.flag("strict"), report.findings.contains(where: { $0.severity == "error" }) { return 1 }
        return 0
    })
