import Dispatch
import Foundation
import Updraft

/// The in-process half of `updraft-bench soak`, run in a child process of its own (so a crash is
/// seen and counted by the parent): `count` tasks drawn by `SoakPlan`, `concurrent` at a time,
/// each model written under `work/models` and read back; resident memory after each task.
struct SoakTasks {
    let count: Int, concurrent: Int, seed: UInt64
    /// An OpenCL device every task is pinned to (as `--device`); nil: the CPU.
    let device: String?
    /// Only these kinds (nil: all, by `SoakPlan.shares`).
    let kinds: [SoakPlan.Kind]?
    /// Hand free heap pages back (`malloc_trim`) before each sample, so the samples count memory in
    /// use rather than what the allocator keeps for later (`--trim`).
    let trim: Bool
    let work: URL

    /// What the phase reports to the parent (one JSON line).
    struct Report: Codable {
        var seconds: Double
        /// Tasks by kind, and by how they ended.
        var kinds: [String: Int] = [:]
        var completed = 0, cancelled = 0
        /// Bad inputs refused with an `UpdraftError`; refused otherwise; accepted (trained).
        var refusedClearly = 0, refusedUnclearly = 0, acceptedBadInputs = 0
        /// Valid tasks that failed, and models the task had but no readable file holds.
        var unexpectedFailures = 0, lostModels = 0, corruptModels = 0
        /// Completed tasks whose written model is byte-equal to the model they started from (nothing trained or appended).
        var unchangedModels = 0
        /// Model files written and read back (every one once more at the end).
        var modelsWritten = 0
        /// Completed tasks of one plan whose models differ from the first of that plan; plans seen twice or more.
        var repeatsDiffering = 0, repeatsChecked = 0
        /// Resident MiB after each task, in the order tasks ended.
        var residentMiB: [Double] = []
        /// One line per problem (capped), naming the task.
        var problems: [String] = []
    }

    /// The report under construction, shared by the workers.
    final class Tally: @unchecked Sendable {
        let lock = NSLock()
        var report = Report(seconds: 0)
        var firstModel: [String: Data] = [:]
        func update(_ body: (inout Report) -> Void) { lock.lock(); body(&report); lock.unlock() }
        func problem(_ line: String) {
            update { if $0.problems.count < 50 { $0.problems.append(line) } }
        }
    }

    func run() throws -> Report {
        let models = work.appendingPathComponent("models", isDirectory: true)
        try FileManager.default.createDirectory(at: models, withIntermediateDirectories: true)
        let tally = Tally()
        let next = ManagedAtomicCounter()
        let start = DispatchTime.now().uptimeNanoseconds
        let group = DispatchGroup()
        for _ in 0..<concurrent {
            group.enter()
            let worker = Thread { [self] in
                while true {
                    let i = next.take()
                    if i >= count { break }
                    runOne(SoakPlan(index: i, seed: seed, kinds: kinds), models: models, tally: tally)
                    if trim { ProcessMemory.trimHeap() }
                    let mib = Double(ProcessMemory.residentBytes() ?? 0) / 1_048_576
                    tally.update { $0.residentMiB.append(mib) }
                }
                group.leave()
            }
            worker.stackSize = 8 << 20
            worker.start()
        }
        group.wait()
        // Every file written must still read back as a whole model.
        for name in try FileManager.default.contentsOfDirectory(atPath: models.path).sorted() where name.hasSuffix(".mlmodel") {
            if let problem = Self.checkModelFile(models.appendingPathComponent(name)) {
                tally.update { $0.corruptModels += 1 }
                tally.problem("at the end, \(name): \(problem)")
            }
        }
        tally.update { $0.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9 }
        return tally.report
    }

    /// nil when the file at `url` reads as a Core ML model that its kind's validator finds ready to
    /// update again (a written model is as updatable as the one trained), else what is wrong.
    static func checkModelFile(_ url: URL) -> String? {
        do {
            let model = try CoreMLModel(contentsOf: url)
            let errors = ModelKinds.validate(model, forUpdate: true).filter { $0.severity == .error }
            return errors.isEmpty ? nil : "the validator refuses it: \(errors.map(\.description).joined(separator: "; "))"
        } catch {
            return "it does not read: \(error)"
        }
    }

    // MARK: One task

    func runOne(_ plan: SoakPlan, models: URL, tally: Tally) {
        tally.update { $0.kinds[plan.kind.rawValue, default: 0] += 1 }
        let task: UpdateTask
        do {
            task = try makeTask(plan)
        } catch {
            classifyFailure(plan, error: error, tally: tally)
            return
        }
        switch plan.cancel {
        case .beforeStart:
            task.cancel()
        case let .afterMicroseconds(us):
            task.resume()
            DispatchQueue.global().asyncAfter(deadline: .now() + .microseconds(us)) { task.cancel() }
        default:
            task.resume()
        }
        let end = task.wait()
        switch task.state {
        case .completed, .cancelled:
            if plan.kind.isBadInput {
                tally.update { $0.acceptedBadInputs += 1 }
                tally.problem("task \(plan.index) (\(plan.kind.rawValue), variant \(plan.variant)): the bad input was accepted")
                return
            }
            tally.update { task.state == .completed ? ($0.completed += 1) : ($0.cancelled += 1) }
            keep(task, plan: plan, models: models, tally: tally)
        default:
            classifyFailure(plan, error: end.error ?? UpdraftError(.device, "failed without an error"), tally: tally)
        }
    }

    /// A bad input must fail with an `UpdraftError` that says what is wrong; a valid task must not fail.
    func classifyFailure(_ plan: SoakPlan, error: Error, tally: Tally) {
        let what = "task \(plan.index) (\(plan.kind.rawValue), variant \(plan.variant))"
        guard plan.kind.isBadInput else {
            tally.update { $0.unexpectedFailures += 1 }
            tally.problem("\(what) failed: \(error)")
            return
        }
        if let e = error as? UpdraftError, !e.message.isEmpty {
            tally.update { $0.refusedClearly += 1 }
        } else {
            tally.update { $0.refusedUnclearly += 1 }
            tally.problem("\(what) failed without an UpdraftError: \(error)")
        }
    }

    /// Writes the task's model (a cancelled network's with its resume state), reads it back, and
    /// compares a completed task's model with the first of its plan.
    func keep(_ task: UpdateTask, plan: SoakPlan, models: URL, tally: Tally) {
        let url = models.appendingPathComponent("task-\(plan.index).mlmodel")
        do {
            if task.state == .cancelled, plan.kind == .lastLayer || plan.kind == .imageNetwork {
                // With its resume state; a task cancelled before it trained has none (as `updraft train` does then).
                do { try task.writeCheckpoint(to: url) } catch { try task.write(to: url) }
            } else {
                try task.write(to: url)
            }
        } catch {
            tally.update { $0.lostModels += 1 }
            tally.problem("task \(plan.index) (\(plan.kind.rawValue)) ended \(task.state) but its model could not be written: \(error)")
            return
        }
        tally.update { $0.modelsWritten += 1 }
        if let problem = Self.checkModelFile(url) {
            tally.update { $0.corruptModels += 1 }
            tally.problem("task \(plan.index) (\(plan.kind.rawValue)): \(url.lastPathComponent) \(problem)")
            return
        }
        guard task.state == .completed, let bytes = try? Data(contentsOf: url) else { return }
        if bytes == Data(task.originalModel.serializedBytes()) {
            tally.update { $0.unchangedModels += 1 }
            tally.problem("task \(plan.index) (\(plan.kind.rawValue)) completed, but its model is the one it started from")
        }
        guard let key = plan.key else { return }
        tally.update { report in
            if let first = tally.firstModel[key] {
                report.repeatsChecked += 1
                if first != bytes {
                    report.repeatsDiffering += 1
                    if report.problems.count < 50 { report.problems.append("task \(plan.index): its model differs from an earlier task's of the same plan (\(key))") }
                }
            } else {
                tally.firstModel[key] = bytes
            }
        }
    }

    // MARK: Making tasks

    func makeTask(_ plan: SoakPlan) throws -> UpdateTask {
        var config = UpdateConfiguration()
        config.placement.computeUnits = device == nil ? .cpuOnly : .all
        config.placement.deviceOption = device
        config.parameters[.miniBatchSize] = .int(Int64(plan.miniBatchSize))
        var handlers = UpdateHandlers()
        if case let .afterMiniBatch(n) = plan.cancel {
            final class Count: @unchecked Sendable { var value = 0 }  // handlers run on the task's thread, one at a time
            let seen = Count()
            handlers = UpdateHandlers(events: .miniBatchEnd, progress: { ctx in
                seen.value += 1
                if seen.value == n { ctx.task.cancel() }
            })
        }
        switch plan.kind {
        case .lastLayer, .knnPipeline:
            let network = try TasksBench.network(learningRate: plan.learningRate, miniBatchSizes: [16, 8, 32], epochs: [2, 1, 3])
            if plan.kind == .lastLayer {
                config.parameters[.epochs] = .int(Int64(plan.epochs))
                config.parameters[.momentum] = .double(plan.momentum)
            } else {
                config.nearestNeighbors.k = plan.neighbors
            }
            return try TasksBench.task(plan.kind == .lastLayer ? .lastLayer : .knnAppend, dataSeed: plan.dataSeed,
                                       learningRate: plan.learningRate, model: network, neighbors: 5, configuration: config, handlers: handlers)
        case .bareKnn:
            config.nearestNeighbors.k = plan.neighbors
            return UpdateTask(model: try SoakInputs.bareKnn(neighbors: 5), trainingData: try SoakInputs.bareKnnData(seed: plan.dataSeed),
                              configuration: config, handlers: handlers)
        case .imageNetwork:
            let model = try SoakInputs.imageNetwork(adam: plan.variant % 2 == 1)
            config.parameters[.learningRate] = .double(plan.learningRate)
            config.parameters[.epochs] = .int(Int64(plan.epochs))
            let data = try ModelDataset(model: model, path: work.appendingPathComponent("images", isDirectory: true))
            return UpdateTask(model: model, trainingData: data.provider, configuration: config, handlers: handlers)
        case .corruptModel, .unreadableImage, .badHyperparameter, .missingFile:
            return try makeBad(plan, config: config)
        }
    }

    /// A task from a bad input; most throw here already, the rest must fail when they run.
    func makeBad(_ plan: SoakPlan, config: UpdateConfiguration) throws -> UpdateTask {
        var config = config
        let images = work.appendingPathComponent("images", isDirectory: true)
        switch plan.kind {
        case .corruptModel:
            var rng = SplitMix64(seed: seed ^ UInt64(plan.index))
            let valid = plan.variant % 2 == 0 ? try TasksBench.network(learningRate: plan.learningRate) : try SoakInputs.imageNetwork(adam: false)
            let url = work.appendingPathComponent("corrupt-\(plan.index).mlmodel")
            try SoakInputs.corrupt(valid, variant: plan.variant / 2, rng: &rng).write(to: url)
            defer { try? FileManager.default.removeItem(at: url) }
            return try UpdateTask(modelAt: url, trainingData: try SyntheticImageDataset(count: 8, itemShape: Shape(TasksBench.shape), classes: 10),
                                  configuration: config)
        case .unreadableImage:
            let model = try SoakInputs.imageNetwork(adam: false)
            let folder = work.appendingPathComponent("unreadable-\(plan.variant % 3)", isDirectory: true)
            return UpdateTask(model: model, trainingData: try ModelDataset(model: model, path: folder).provider, configuration: config)
        case .badHyperparameter:
            let model = try TasksBench.network(learningRate: plan.learningRate, miniBatchSizes: [16, 8, 32], epochs: [2, 1, 3])
            switch plan.variant % 6 {
            case 0: config.parameters[.learningRate] = .double(1.5)       // outside [0, 1]
            case 1: config.parameters[.miniBatchSize] = .int(12)          // not in {8, 16, 32}
            case 2: config.parameters[.epochs] = .int(7)                  // not in {1, 2, 3}
            case 3: config.parameters[.momentum] = .double(-0.5)          // outside [0, 1]
            case 4: config.parameters[.epochs] = .int(0)                  // epochs must be at least 1
            default:
                config.nearestNeighbors.k = 5000                           // outside 1...1000
                return try TasksBench.task(.knnAppend, dataSeed: plan.dataSeed, learningRate: plan.learningRate, model: model,
                                           configuration: config)
            }
            return try TasksBench.task(.lastLayer, dataSeed: plan.dataSeed, learningRate: plan.learningRate, model: model,
                                       configuration: config)
        default:
            let missing = work.appendingPathComponent("missing-\(plan.index)")
            switch plan.variant % 3 {
            case 0: return try UpdateTask(modelAt: missing.appendingPathExtension("mlmodel"), trainingData: try SoakInputs.bareKnnData(seed: 1))
            case 1:
                let model = try SoakInputs.imageNetwork(adam: false)
                return UpdateTask(model: model, trainingData: try ModelDataset(model: model, path: missing).provider, configuration: config)
            default:
                return try UpdateTask(resumingFrom: missing.appendingPathExtension("mlmodel"), trainingData: try ModelDataset(
                    model: try SoakInputs.imageNetwork(adam: false), path: images).provider, configuration: config)
            }
        }
    }
}

/// The next task index, handed to one worker at a time.
final class ManagedAtomicCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0
    func take() -> Int { lock.lock(); defer { lock.unlock() }; value += 1; return value - 1 }
}
