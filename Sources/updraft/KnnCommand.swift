import Foundation
import Updraft
import UpdraftCommandLine

let knnCommand = CLICommand(CommandSpec(
    name: "knn",
    summary: "Count, edit, export and import a k-NN classifier's samples (past Core ML, which only appends).",
    positionals: "MODEL.mlmodel", minPositionals: 1, maxPositionals: 1,
    options: OptionSpec.table("""
        --import DIR          append the samples of DIR (inputs.npy with labels.txt or targets.npy)
        --remove-label LABEL  remove every sample of LABEL (repeatable)
        --dedupe              drop samples that repeat an earlier one exactly (values and label)
        --max-per-label N     keep at most N samples of each label, chosen by seeded reservoir sampling
        --seed S              the reservoir sampling's seed (default 0)
        """, repeatable: ["remove-label"]) + [neighborsOption] + OptionSpec.table("""
        --export DIR         write the samples to DIR/inputs.npy and their labels to DIR/labels.txt (after the edits)
        --out OUT.mlmodel    where to write the edited model (required for an edit; may be MODEL itself)
        --json               print the samples per label as JSON
        --sidecar FILE.json  also write a JSON summary of the written model (interop checks)
        """),
    discussion: "The edits run in this order: --import, --remove-label, --dedupe, --max-per-label, --neighbors; then --export, "
        + "then the samples per label are printed. The model is written atomically to --out; MODEL is never touched unless --out names it."
)) { args in
    let modelURL = URL(fileURLWithPath: args.positionals[0])
    var model = try CoreMLModel(contentsOf: modelURL)
    guard model.kNearestNeighbors != nil else {
        throw UpdraftError(.invalidModel, "\(modelURL.lastPathComponent) is a \(model.spec.modelType.name), not a k-nearest-neighbors classifier",
                           hint: "updraft knn edits k-NN classifiers; `updraft inspect` shows what the model is")
    }
    let removals = args.all("remove-label")
    let cap = try args.int("max-per-label"), seed = try args.int("seed") ?? 0, k = try args.int("neighbors")
    let edits = args.value("import") != nil || !removals.isEmpty || args.flag("dedupe") || cap != nil || k != nil
    let out = args.value("out").map { URL(fileURLWithPath: $0) }
    if edits && out == nil { throw UsageError("an edit needs --out OUT.mlmodel (give MODEL itself to edit it in place)") }
    if !edits && out != nil { throw UsageError("--out writes an edited model: give an edit (--import, --remove-label, --dedupe, --max-per-label, --neighbors)") }
    if args.value("seed") != nil && cap == nil { throw UsageError("--seed chooses the samples --max-per-label keeps: give --max-per-label N") }
    if let out { try checkWritable(out, option: "--out") }
    // With --json, stdout holds the JSON alone; what was done goes to stderr.
    let say: (String) -> Void = args.flag("json") ? { printError($0) } : { print($0) }
    // Every edit is checked before anything is written.
    if let folder = args.value("import") {
        let before = model.kNearestNeighbors!.samples.count
        model = try KNearestNeighborsFiles.importing(from: URL(fileURLWithPath: folder), into: model)
        say("imported \(model.kNearestNeighbors!.samples.count - before) samples from \(folder)")
    }
    model = try model.editingKNearestNeighbors { knn in
        for label in removals { say("removed \(try knn.removeSamples(labelled: label)) samples labelled '\(label)'") }
        if args.flag("dedupe") { say("removed \(knn.removeDuplicateSamples()) duplicate samples") }
        if let cap { say("removed \(try knn.capSamplesPerLabel(cap, seed: UInt64(bitPattern: Int64(seed)))) samples past \(cap) per label (seed \(seed))") }
        if let k { try knn.setNumberOfNeighbors(k); say("numberOfNeighbors: \(k)") }
    }
    let knn = model.kNearestNeighbors!
    if let folder = args.value("export") {
        try KNearestNeighborsFiles.export(knn, to: URL(fileURLWithPath: folder))
        say("exported \(knn.samples.count) samples to \(folder)/inputs.npy and labels.txt")
    }
    if let out {
        try model.write(to: out)
        say("wrote \(out.path)")
        if let sidecar = args.value("sidecar") { try InteropSidecar.write(for: try CoreMLModel(contentsOf: out), to: URL(fileURLWithPath: sidecar)) }
    } else if args.value("sidecar") != nil {
        throw UsageError("--sidecar describes the model written to --out: give an edit and --out")
    }
    let counts = knn.samplesPerLabel
    if args.flag("json") {
        let obj: [String: Any] = ["samples": knn.samples.count, "dimension": Int(knn.dimension),
                                  "labels": counts.map { ["label": $0.label, "count": $0.count] as [String: Any] }]
        print(String(decoding: try JSONSerialization.data(withJSONObject: obj, options: [.sortedKeys]), as: UTF8.self))
    } else {
        print("\(knn.samples.count) samples of dimension \(knn.dimension), \(counts.count) labels")
        if !counts.isEmpty {
            print(formatTable([["label", "samples"]] + counts.map { [$0.label, String($0.count)] }, rightAligned: [1]), terminator: "")
        }
    }
    return 0
}
