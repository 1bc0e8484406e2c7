import Dispatch
import Foundation
import Updraft

/// The child-process half of `updraft-bench soak`: `updraft train` runs killed with SIGKILL at
/// random moments and continued with `--resume` (or started again when killed before their first
/// checkpoint) until they finish; each finished model must equal an uninterrupted run's byte for
/// byte, as `TrainingResumeCommandTests` shows it does on the CPU, and every file a killed run
/// left must be absent or whole.
struct SoakKills {
    let updraft: String, kills: Int, seed: UInt64, device: String?, work: URL

    /// Where every run trains: the CPU, or the OpenCL device `device` (the resume tests hold on both).
    var deviceArguments: [String] { device.map { ["--device", $0] } ?? ["--compute-units", "cpuOnly"] }

    struct Report: Codable {
        var seconds = 0.0
        /// Runs to the end, SIGKILLs delivered, kills that found the run already ended.
        var runs = 0, kills = 0, finishedBeforeKill = 0
        /// Continued with --resume; started again (killed before a checkpoint was written).
        var resumes = 0, restarts = 0
        /// Children that died of another signal; that exited with an error; files a kill left that do not read.
        var crashes = 0, failures = 0, corruptFiles = 0
        /// Finished runs without a model; finished models that differ from the uninterrupted run's.
        var lostModels = 0, resumesDiffering = 0, identical = 0
        var problems: [String] = []
    }

    /// The uninterrupted run of a configuration: its model's bytes, how long it took, and when its
    /// first checkpoint appeared (kills are drawn across the whole run and, mostly, after that).
    struct Reference { var bytes: Data; var seconds: Double; var firstCheckpoint: Double }

    func run() throws -> Report {
        var report = Report()
        let start = DispatchTime.now().uptimeNanoseconds
        let images = work.appendingPathComponent("images", isDirectory: true)
        let runs = work.appendingPathComponent("kills", isDirectory: true)
        try FileManager.default.createDirectory(at: runs, withIntermediateDirectories: true)
        var references: [Reference] = []
        for adam in [false, true] {
            let model = runs.appendingPathComponent("model-\(adam ? "adam" : "sgd").mlmodel")
            try SoakInputs.imageNetwork(adam: adam).write(to: model)
            let out = runs.appendingPathComponent("reference-\(adam ? "adam" : "sgd").mlmodel")
            let (ended, seconds, first) = try launch(trainArguments(model: model, data: images, out: out), watching: out, kill: nil)
            guard ended.reason == .exit, ended.status == 0, let bytes = try? Data(contentsOf: out) else {
                throw UpdraftError(.device, "the uninterrupted `updraft train` run failed (\(ended.reason == .exit ? "status" : "signal") \(ended.status)): \(ended.stderr.suffix(600))")
            }
            references.append(Reference(bytes: bytes, seconds: seconds, firstCheckpoint: first ?? 0))
        }
        var rng = SplitMix64(seed: seed ^ 0x5EED_0F_C1_11)
        var index = 0
        // Until `kills` SIGKILLs landed (a run that ends before its kill takes none), at most 4 runs a kill.
        while report.kills < kills && index < 4 * kills + 2 {
            let config = index % 2
            try killAndResume(index, config: config, reference: references[config], images: images, runs: runs, rng: &rng, report: &report)
            index += 1
        }
        report.seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return report
    }

    func trainArguments(model: URL, data: URL, out: URL) -> [String] {
        ["train", model.path, "--train", data.path, "--out", out.path, "--checkpoint-every-batches", "3"] + deviceArguments
    }

    /// Run `index`: 1 to 3 kills (fewer when the soak's count is reached), then to the end.
    func killAndResume(_ index: Int, config: Int, reference: Reference, images: URL, runs: URL, rng: inout SplitMix64,
                       report: inout Report) throws {
        let model = runs.appendingPathComponent("model-\(config == 1 ? "adam" : "sgd").mlmodel")
        let out = runs.appendingPathComponent("run-\(index).mlmodel")
        let state = TrainingCheckpoint.url(forModel: out)
        var killsLeft = min(1 + Int(rng.next() % 3), kills - report.kills)
        var attempts = 0
        while true {
            let resuming = FileManager.default.fileExists(atPath: state.path)
            let arguments = resuming ? ["train", "--resume", out.path, "--train", images.path] + deviceArguments
                                     : trainArguments(model: model, data: images, out: out)
            if resuming { report.resumes += 1 } else if attempts > 0 { report.restarts += 1 }
            attempts += 1
            // A moment anywhere in a run (one kill in four), else after it wrote a checkpoint (so the
            // next attempt resumes), both drawn over the uninterrupted run's time.
            var moment: KillMoment? = nil
            if killsLeft > 0 {
                let u = Double(rng.next() % 1_000_000) / 1_000_000
                moment = rng.next() % 4 == 0 ? .afterStart(u * reference.seconds)
                    : .afterCheckpoint(state, u * max(0.001, reference.seconds - reference.firstCheckpoint))
            }
            let (ended, _, _) = try launch(arguments, watching: nil, kill: moment)
            let what = "kill run \(index)"
            if ended.reason == .uncaughtSignal && ended.status == SIGKILL && moment != nil {
                report.kills += 1
                killsLeft -= 1
                // What the kill left: no file, or a whole model and a readable resume state.
                if FileManager.default.fileExists(atPath: out.path), let problem = SoakTasks.checkModelFile(out) {
                    report.corruptFiles += 1
                    report.problems.append("\(what): after a SIGKILL, \(out.lastPathComponent) \(problem)")
                    return
                }
                if FileManager.default.fileExists(atPath: state.path) {
                    do { _ = try TrainingCheckpoint.read(forModel: out) } catch {
                        report.corruptFiles += 1
                        report.problems.append("\(what): after a SIGKILL, \(state.lastPathComponent) does not read: \(error)")
                        return
                    }
                }
                continue
            }
            if moment != nil { report.finishedBeforeKill += 1 }
            if ended.reason == .uncaughtSignal {
                report.crashes += 1
                report.problems.append("\(what): `updraft \(arguments.joined(separator: " "))` died of signal \(ended.status): \(ended.stderr.suffix(400))")
                return
            }
            guard ended.status == 0 else {
                report.failures += 1
                report.problems.append("\(what): `updraft \(arguments.joined(separator: " "))` exited \(ended.status): \(ended.stderr.suffix(400))")
                return
            }
            report.runs += 1
            guard let bytes = try? Data(contentsOf: out) else {
                report.lostModels += 1
                report.problems.append("\(what): finished, but \(out.lastPathComponent) is missing")
                return
            }
            if bytes == reference.bytes {
                report.identical += 1
            } else {
                report.resumesDiffering += 1
                report.problems.append("\(what): the finished model differs from the uninterrupted run's")
            }
            for url in [out, state, TrainingHistory.url(forModel: out)] { try? FileManager.default.removeItem(at: url) }
            return
        }
    }

    struct Ended { var reason: Process.TerminationReason; var status: Int32; var stderr: String }

    /// When a run gets its SIGKILL: seconds after it started, or seconds after the resume state at
    /// the URL was next written (created, or replaced by a later checkpoint).
    enum KillMoment { case afterStart(Double), afterCheckpoint(URL, Double) }

    /// The identity of the file at `url` (its inode and modification time; an atomic write replaces both), nil when absent.
    static func identity(_ url: URL) -> [String]? {
        guard let a = try? FileManager.default.attributesOfItem(atPath: url.path) else { return nil }
        return ["\(a[.systemFileNumber] ?? "")", "\((a[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0)"]
    }

    /// Runs `updraft arguments`, sending SIGKILL at `kill` if it still runs then. Returns how it
    /// ended, its seconds, and when `watching`'s resume state first appeared.
    func launch(_ arguments: [String], watching: URL?, kill moment: KillMoment?) throws -> (Ended, Double, Double?) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: updraft)
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for key in [DevicePin.environmentVariable, DataParallelMode.environmentVariable] { env.removeValue(forKey: key) }
        env[CalibrationCache.directoryVariable] = work.appendingPathComponent("cache").path
        process.environment = env
        process.standardOutput = FileHandle.nullDevice
        let err = Pipe()
        process.standardError = err
        final class Collected: @unchecked Sendable { var data = Data() }  // written before the semaphore, read after
        let collected = Collected()
        let drained = DispatchSemaphore(value: 0)
        let began = DispatchTime.now().uptimeNanoseconds
        func elapsed() -> Double { Double(DispatchTime.now().uptimeNanoseconds - began) / 1e9 }
        try process.run()
        Thread.detachNewThread { collected.data = err.fileHandleForReading.readDataToEndOfFile(); drained.signal() }
        var first: Double? = nil
        if let watching {
            let state = TrainingCheckpoint.url(forModel: watching)
            while process.isRunning {
                if first == nil, FileManager.default.fileExists(atPath: state.path) { first = elapsed() }
                usleep(2_000)
            }
        } else if let moment {
            var due: Double? = nil, before: [String]? = nil
            switch moment {
            case let .afterStart(delay): due = delay
            case let .afterCheckpoint(state, _): before = Self.identity(state)
            }
            while process.isRunning {
                if due == nil, case let .afterCheckpoint(state, delay) = moment, let now = Self.identity(state), now != before {
                    due = elapsed() + delay
                }
                if let due, elapsed() >= due { break }
                usleep(due.map { useconds_t(max(1, min(1_000, ($0 - elapsed()) * 1e6))) } ?? 1_000)
            }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        process.waitUntilExit()
        let seconds = elapsed()
        drained.wait()
        return (Ended(reason: process.terminationReason, status: process.terminationStatus,
                      stderr: String(decoding: collected.data, as: UTF8.self)), seconds, first)
    }
}
