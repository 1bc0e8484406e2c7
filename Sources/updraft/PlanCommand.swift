import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft plan MODEL.mlmodel [--compute-units U] [--batch-size N] [--device NAME|INDEX] [--json]`:
/// where training would run each layer, with estimated times, transfers and the total per batch.
let planCommand = CLICommand(
    CommandSpec(
        name: "plan",
        summary: "Show where each layer of a model would train (device, estimated forward and backward times, transfers)",
        positionals: "MODEL.mlmodel", minPositionals: 1, maxPositionals: 1,
        options: [
            OptionSpec("compute-units", value: "U",
                       help: "devices the plan may use: cpuOnly, cpuAndGPU or all (default all, as in Core ML)"),
            OptionSpec("batch-size", value: "N", help: "examples per batch (default: the model's miniBatchSize)"),
            OptionSpec("device", value: "NAME|INDEX",
                       help: "run everything on one device: cpu, or an index or part of a name from `updraft devices`"),
            OptionSpec("json", help: "print the plan as JSON"),
            dataParallelOption,
        ],
        discussion: """
        Devices are calibrated once (a short measurement) and cached in $\(CalibrationCache.directoryVariable), \
        $XDG_CACHE_HOME/updraft or ~/.cache/updraft. Times are estimates from each layer's FLOPs and bytes and \
        each device's measured speed. The model stays on one device unless running the frozen prefix (layers that \
        depend on no updatable layer, forward only) on another device than the trainable tail is clearly faster, or \
        splitting every batch across OpenCL devices (data parallelism) is. \(DevicePin.environmentVariable) pins \
        a device like --device (the option wins).
        """),
    run: { args in
        let path = args.positionals[0]
        let computeUnits = try args.choice("compute-units", ComputeUnits.choices).flatMap(ComputeUnits.init(rawValue:))
            ?? .default
        let model = try CoreMLModel(contentsOf: URL(fileURLWithPath: path))
        let graph = try NetworkGraph(model: model)
        let option = try args.int("batch-size")
        let modelDefault = graph.updateParameters?.optimizer?.miniBatchSize.map { Int(clamping: $0.defaultValue) }
        let batchSize = option ?? modelDefault ?? 8
        try SizeLimits.checkBatchSize(batchSize, graph: graph, source: option != nil ? "--batch-size"
                                          : modelDefault != nil ? "the model's default miniBatchSize" : "the default mini-batch size")

        let request = DevicePin.request(option: args.value("device"))
        let inventory = DeviceInventory.discover(includeOpenCL: computeUnits.usesOpenCL || request != nil)
        let pin = try inventory.resolvePin(request)
        let mode = try DataParallelMode.resolve(option: args.value("data-parallel"), environment: ProcessInfo.processInfo.environment)
        let (plan, warnings) = try inventory.plan(graph: graph, batchSize: batchSize, computeUnits: computeUnits,
                                                  pin: pin, pinSource: request?.source, cache: CalibrationCache(),
                                                  options: Scheduler.Options(dataParallel: mode))
        for w in warnings { printError("warning: \(w)") }
        if args.flag("json") {
            var object = try plan.jsonObject()
            object["model"] = path
            object["warnings"] = warnings
            let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        } else {
            print("Model: \(path)")
            print(plan.text(), terminator: "")
        }
        return 0
    })
