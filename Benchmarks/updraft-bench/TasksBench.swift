import Dispatch
import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft-bench tasks`: N small update tasks, the kind a personalisation service runs per user,
/// at once in one process, then each alone in a process of its own; throughput, peak memory and,
/// per task, whether its model is byte-equal to its solo run (every one must be).
let tasksCommand = CLICommand(CommandSpec(
    name: "tasks",
    summary: "run N small update tasks at once, then each alone: throughput, peak memory, identical models",
    options: OptionSpec.table("""
        --tasks N          tasks (default 16)
        --compute-units U  cpuOnly, cpuAndGPU or all (default cpuOnly; all with --device)
        --device D         pin every task to this device, as --device (an OpenCL index, or cpu)
        --phase P          internal: run one phase in this process (together, or one task with --index)
        --index I          internal: the task of --phase one
        --out DIR          internal: where a phase writes its models
        --json             print JSON
        """),
    discussion: """
    Tasks alternate between two kinds, each on 64 synthetic 3x32x32 images of 10 classes (seeded by
    the task's index): even tasks train the last layer of a small network (two frozen convolutions,
    a trainable inner product; batch 16, 2 epochs, a learning rate of their own), odd tasks append
    the images' embeddings to an empty k-NN behind the same network (batch 16). Phase 1 runs the N
    tasks at once (a thread each, `resume()`) in a child process; phase 2 runs each task alone in a
    child process of its own. Throughput: tasks/s and examples/s over the wall time of phase 1, and
    over the summed task times of phase 2. Peak memory: VmHWM of the phase-1 process, and the sum
    and the largest of the phase-2 processes' (a process alone, Updraft loaded, holds the baseline).
    `identical` is true when the task's model is byte-equal to its solo run's.
    """
)) { args in try TasksBench(args).run() }

struct TasksBench {
    /// Examples per task, and the images' shape.
    static let examples = 64
    static let shape = [3, 32, 32]

    let count: Int, computeUnits: ComputeUnits, device: String?, json: Bool
    let phase: String?, index: Int?, out: URL?

    init(_ args: ParsedArguments) throws {
        count = try args.int("tasks") ?? 16
        guard count >= 1 else { throw UsageError("--tasks must be at least 1, got \(count)") }
        // A pinned device needs compute units that allow it: all, unless told otherwise.
        let units = args.value("compute-units") ?? (args.value("device").map { $0 == "cpu" ? "cpuOnly" : "all" } ?? "cpuOnly")
        guard let u = ComputeUnits(rawValue: units) else { throw UsageError("--compute-units: cpuOnly, cpuAndGPU or all, not \(units)") }
        computeUnits = u
        device = args.value("device")
        json = args.flag("json")
        phase = args.value("phase")
        index = try args.int("index")
        out = args.value("out").map { URL(fileURLWithPath: $0) }
    }

    // MARK: The tasks

    /// The frozen-features network: two convolutions with pooling, a trainable inner product to 10
    /// classes; SGD with momentum 0.9 unless given, batch size and epochs the first of their allowed
    /// values (`updraft-bench soak` allows several).
    static func network(learningRate: Double, momentum: Double = 0.9, miniBatchSizes: [Int64] = [16],
                        epochs: [Int64] = [2]) throws -> CoreMLModel {
        let image = FeatureDescription(name: "image", type: .multiArray(ArrayFeatureType(shape: shape, dataType: .float32)))
        var b = try ModelBuilder(input: image, seed: 5)
        try b.convolution("conv1", outputChannels: 8, kernel: (3, 3), stride: (2, 2))
        try b.activation("relu1", .relu)
        try b.convolution("conv2", outputChannels: 16, kernel: (3, 3), stride: (2, 2))
        try b.activation("relu2", .relu)
        try b.globalPoolClassifierHead(pool: "pool", dense: "classifier", labels: .numbered(10))
        try b.makeUpdatable(["classifier"])
        try b.setCrossEntropyLoss(input: "probabilities")
        b.setOptimizer(.sgd(learningRate: learningRate, miniBatchSize: miniBatchSizes[0], allowedMiniBatchSizes: miniBatchSizes,
                            momentum: momentum))
        b.setEpochs(epochs[0], allowed: epochs)
        b.setShuffle(true, seed: 1)
        return try b.build()
    }

    /// The two kinds of task.
    enum Kind: String, Codable, CaseIterable {
        /// The network's last layer trains (`network`).
        case lastLayer = "last-layer"
        /// The network's embeddings are appended to an empty k-NN behind it (a pipeline).
        case knnAppend = "knn-append"
    }

    /// A task of `kind` on `examples` synthetic images seeded by `dataSeed`, with `configuration`
    /// (its parameters override the model's defaults) and `model` built for it (by default `network`
    /// at `learningRate`; for `.knnAppend`, the network becomes the pipeline's feature extractor).
    static func task(_ kind: Kind, dataSeed: UInt64, learningRate: Double, model: CoreMLModel? = nil, neighbors: Int = 3,
                     configuration: UpdateConfiguration, handlers: UpdateHandlers = UpdateHandlers()) throws -> UpdateTask {
        let images = try SyntheticImageDataset(count: examples, itemShape: Shape(shape), classes: 10, seed: dataSeed)
        let network = try model ?? network(learningRate: learningRate)
        switch kind {
        case .lastLayer:
            return UpdateTask(model: network, trainingData: images, configuration: configuration, handlers: handlers)
        case .knnAppend:
            let pipeline = try NearestNeighborsPipeline(neighbors: neighbors).make(featureExtractor: network)
            return UpdateTask(model: pipeline, trainingData: KnnBench.LabelledImages(images: images), configuration: configuration,
                              handlers: handlers)
        }
    }

    /// Task `i`: its model and data (see the discussion).
    static func task(_ i: Int, computeUnits: ComputeUnits, device: String?) throws -> UpdateTask {
        var config = UpdateConfiguration()
        config.placement.computeUnits = computeUnits
        config.placement.deviceOption = device
        config.parameters[.miniBatchSize] = .int(16)
        return try task(i % 2 == 0 ? .lastLayer : .knnAppend, dataSeed: UInt64(1000 + i), learningRate: 0.01 * Double(1 + i % 7),
                        configuration: config)
    }

    // MARK: Phases (child processes)

    /// What one phase process reports: seconds, peak resident bytes, and each task's seconds.
    struct PhaseReport: Codable {
        var seconds: Double
        var peakBytes: Int
        var taskSeconds: [Double]
    }

    /// Runs `indices` at once (one task: alone), writes each model to `out/task-i.mlmodel`, prints a PhaseReport.
    func runPhase(_ indices: [Int], out: URL) throws {
        let tasks = try indices.map { try Self.task($0, computeUnits: computeUnits, device: device) }
        let ends = Array(repeating: 0.0, count: tasks.count)
        final class Times: @unchecked Sendable { var ends: [Double]; let lock = NSLock(); init(_ e: [Double]) { ends = e } }
        let times = Times(ends)
        let start = DispatchTime.now().uptimeNanoseconds
        func elapsed() -> Double { Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9 }
        if tasks.count == 1 {
            tasks[0].run()
            times.ends[0] = elapsed()
        } else {
            tasks.forEach { $0.resume() }
            for (k, t) in tasks.enumerated() { t.wait(); times.lock.lock(); times.ends[k] = elapsed(); times.lock.unlock() }
        }
        let seconds = elapsed()
        for (k, t) in tasks.enumerated() {
            let end = t.wait()
            if let e = end.error { throw UpdraftError(.device, "task \(indices[k]) failed: \(e)") }
            try t.currentModel().write(to: out.appendingPathComponent("task-\(indices[k]).mlmodel"))
        }
        let report = PhaseReport(seconds: seconds, peakBytes: ProcessMemory.peakResidentBytes() ?? 0, taskSeconds: times.ends)
        print(String(decoding: try JSONEncoder().encode(report), as: UTF8.self))
    }

    // MARK: The benchmark

    /// One task's figures.
    struct TaskRow: Codable {
        var task: Int, kind: String, soloSeconds: Double, soloPeakBytes: Int, identical: Bool
    }

    struct Report: Codable {
        var tasks: Int, examplesPerTask: Int, computeUnits: String, device: String?
        var concurrentSeconds: Double, concurrentTasksPerSecond: Double, concurrentExamplesPerSecond: Double
        var soloSeconds: Double, soloTasksPerSecond: Double, soloExamplesPerSecond: Double
        var concurrentPeakBytes: Int, soloPeakBytesSum: Int, soloPeakBytesMax: Int
        var allIdentical: Bool
        /// The concurrent phase's peak is below the sum of the solo peaks (tasks share the process's baseline and caches).
        var peakBelowSoloSum: Bool
        var perTask: [TaskRow]
    }

    func child(_ arguments: [String], exe: String) throws -> PhaseReport {
        var common = ["tasks", "--tasks", "\(count)", "--compute-units", computeUnits.rawValue]
        if let device { common += ["--device", device] }
        let result = try runChild(executable: exe, arguments: common + arguments, captureStandardError: true)
        guard result.status == 0, !result.signalled,
              let line = result.standardOutput.split(separator: "\n").last(where: { $0.hasPrefix("{") }) else {
            throw UpdraftError(.device, "the benchmark's child \(arguments.joined(separator: " ")) failed (status \(result.status)): \(result.standardError.suffix(400))")
        }
        return try JSONDecoder().decode(PhaseReport.self, from: Data(line.utf8))
    }

    func run() throws -> Int32 {
        if let phase {
            guard let out else { throw UsageError("--phase needs --out") }
            switch phase {
            case "together": try runPhase(Array(0..<count), out: out); return 0
            case "one":
                guard let index else { throw UsageError("--phase one needs --index") }
                try runPhase([index], out: out); return 0
            default: throw UsageError("--phase: together or one, not \(phase)")
            }
        }
        guard let exe = executablePath() else { throw UpdraftError(.io, "cannot find the benchmark's own executable to run its phases") }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-tasks-\(getpid())")
        let (together, alone) = (folder.appendingPathComponent("together"), folder.appendingPathComponent("alone"))
        for f in [together, alone] { try FileManager.default.createDirectory(at: f, withIntermediateDirectories: true) }
        defer { try? FileManager.default.removeItem(at: folder) }

        let concurrent = try child(["--phase", "together", "--out", together.path], exe: exe)
        var solo: [PhaseReport] = []
        for i in 0..<count { solo.append(try child(["--phase", "one", "--index", "\(i)", "--out", alone.path], exe: exe)) }
        var rows: [TaskRow] = []
        for i in 0..<count {
            let name = "task-\(i).mlmodel"
            let a = try Data(contentsOf: together.appendingPathComponent(name)), b = try Data(contentsOf: alone.appendingPathComponent(name))
            rows.append(TaskRow(task: i, kind: (i % 2 == 0 ? Kind.lastLayer : .knnAppend).rawValue, soloSeconds: solo[i].seconds,
                                soloPeakBytes: solo[i].peakBytes, identical: a == b))
        }
        let soloSeconds = solo.map(\.seconds).reduce(0, +)
        let examples = Double(count * Self.examples)
        let report = Report(tasks: count, examplesPerTask: Self.examples, computeUnits: computeUnits.rawValue, device: device,
                            concurrentSeconds: concurrent.seconds, concurrentTasksPerSecond: Double(count) / concurrent.seconds,
                            concurrentExamplesPerSecond: examples / concurrent.seconds,
                            soloSeconds: soloSeconds, soloTasksPerSecond: Double(count) / soloSeconds, soloExamplesPerSecond: examples / soloSeconds,
                            concurrentPeakBytes: concurrent.peakBytes, soloPeakBytesSum: solo.map(\.peakBytes).reduce(0, +),
                            soloPeakBytesMax: solo.map(\.peakBytes).max() ?? 0, allIdentical: rows.allSatisfy(\.identical),
                            peakBelowSoloSum: concurrent.peakBytes < solo.map(\.peakBytes).reduce(0, +), perTask: rows)
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(report), as: UTF8.self))
        } else {
            let mib = { (b: Int) in String(format: "%.1f MiB", Double(b) / 1048576) }
            print("\(count) tasks (\(Self.examples) examples each, \(computeUnits.rawValue)\(device.map { ", device \($0)" } ?? ""))")
            print(String(format: "  at once: %.3f s, %.1f tasks/s, %.0f examples/s, peak %@", concurrent.seconds,
                         report.concurrentTasksPerSecond, report.concurrentExamplesPerSecond, mib(concurrent.peakBytes)))
            print(String(format: "  alone:   %.3f s summed, %.1f tasks/s, %.0f examples/s, peak %@ summed (%@ the largest)", soloSeconds,
                         report.soloTasksPerSecond, report.soloExamplesPerSecond, mib(report.soloPeakBytesSum), mib(report.soloPeakBytesMax)))
            print("  peak at once below the solo peaks' sum: \(report.peakBelowSoloSum)")
            print("  identical to the solo runs: \(rows.filter(\.identical).count) of \(count)"
                  + (report.allIdentical ? "" : " (differ: \(rows.filter { !$0.identical }.map(\.task)))"))
        }
        // Every model must equal its solo run's: anything else is a failure, whatever the speed.
        return report.allIdentical ? 0 : 1
    }
}
