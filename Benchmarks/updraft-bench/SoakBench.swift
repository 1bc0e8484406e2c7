import Dispatch
import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft-bench soak`: many update tasks in one process under cancellation and bad inputs, and
/// `updraft train` runs killed with SIGKILL and resumed (issue 26, item 5). `make soak` runs it at
/// full size; `SoakBenchTests` at a tiny one.
let soakCommand = CLICommand(CommandSpec(
    name: "soak",
    summary: "N update tasks K at a time, cancelled and fed bad inputs, plus killed and resumed `updraft train` runs",
    options: OptionSpec.table("""
        --tasks N            update tasks in one process (default 1000)
        --concurrent K       tasks at a time (default 8)
        --kills M            SIGKILLs delivered to child `updraft train` runs (default 20)
        --device D           where tasks and runs train: cpu (default) or an OpenCL device index, as --device
        --kinds K,K          only these task kinds: \(SoakPlan.Kind.allCases.map(\.rawValue).joined(separator: ", "))
        --seed S             draws the tasks, bad inputs, cancel points and kill moments (default 1)
        --max-rss-slope MIB  fail when resident memory grows faster than MIB per task (default 0.1)
        --trim               malloc_trim before each memory sample: memory in use, not what the allocator keeps
        --json               print JSON
        --json-out FILE      also write the JSON report to FILE (the table is printed)
        --phase P            internal: `tasks` runs the in-process half in this process
        --work DIR           internal: the soak's folder, for --phase
        """),
    discussion: """
    The tasks (SoakPlan) run in a child process, K at a time, each from a plan the seed and its index
    draw: TasksBench's last-layer and k-NN pipeline tasks, a bare k-NN, a small image network on a
    PNG folder, with varied learning rate, momentum, batch size, epochs and k; one valid task in five
    is cancelled (before it starts, after a mini-batch, or after a delay); one in five is a bad input
    (corrupt model bytes, an unreadable image, a hyperparameter outside the allowed values, a missing
    file), which must fail with an UpdraftError. Every model a task ends with is written, read back
    and validated, and read again at the end; completed tasks of the same plan must have byte-equal
    models. Resident memory is sampled after each task; the slope is the least-squares fit over the
    tasks after the first tenth (the last 900 of 1000). Meanwhile `updraft train` runs of the image
    network (SGD and Adam) are killed with SIGKILL at random moments and resumed until they finish;
    each must equal the uninterrupted run byte for byte. Exit status 1 when anything is counted in
    crashes, lost, corrupt, differing, unexpected failures or bad inputs accepted or refused without
    an UpdraftError, or (from 100 tasks) when the RSS slope passes --max-rss-slope. --device 0 runs
    the tasks and the killed runs on an OpenCL device; --kinds keeps only some kinds (to find which
    one grows); --trim calls malloc_trim before each sample, so the slope counts memory in use, not
    pages glibc keeps in its per-thread arenas (on PoCL, whose buffers are host allocations made
    from many threads, that retention is most of the raw growth).
    """
)) { args in try SoakBench(args).run() }

struct SoakBench {
    let tasks: Int, concurrent: Int, kills: Int, seed: UInt64, maxSlope: Double, json: Bool
    /// `--device`: nil for the CPU.
    let device: String?
    /// `--kinds`: nil for every kind.
    let kinds: [SoakPlan.Kind]?
    let trim: Bool
    /// `--json-out`: where to write the JSON report as well.
    let jsonOut: String?
    let phase: String?, work: URL?

    init(_ args: ParsedArguments) throws {
        tasks = try args.int("tasks") ?? 1000
        concurrent = try args.int("concurrent") ?? 8
        kills = try args.int("kills") ?? 20
        seed = UInt64(truncatingIfNeeded: try args.int("seed") ?? 1)
        maxSlope = try args.double("max-rss-slope") ?? 0.1
        guard tasks >= 1, concurrent >= 1, kills >= 0 else { throw UsageError("--tasks and --concurrent must be at least 1, --kills at least 0") }
        json = args.flag("json")
        trim = args.flag("trim")
        jsonOut = args.value("json-out")
        device = args.value("device").flatMap { $0 == "cpu" ? nil : $0 }
        kinds = try args.value("kinds").map { list in
            try list.split(separator: ",").map { name in
                guard let kind = SoakPlan.Kind(rawValue: String(name)) else {
                    throw UsageError("--kinds: \(name) is not a kind; the kinds are " + SoakPlan.Kind.allCases.map(\.rawValue).joined(separator: ", "))
                }
                return kind
            }
        }
        phase = args.value("phase")
        work = args.value("work").map { URL(fileURLWithPath: $0, isDirectory: true) }
    }

    struct Report: Codable {
        var seed: UInt64, tasks: Int, concurrent: Int, device: String, seconds: Double
        /// The task phase's child died (or left no report): everything it had counted is lost with it.
        var crashes: Int
        var taskPhase: SoakTasks.Report?
        var kills: SoakKills.Report
        /// Resident MiB per task (least squares over the tasks after the first tenth), and over how many.
        var rssSlopeMiBPerTask: Double?, rssSlopeTasks: Int, rssFirstMiB: Double?, rssLastMiB: Double?
        var rssSlopeJudged: Bool, maxRssSlope: Double
        var passed: Bool
    }

    func run() throws -> Int32 {
        if let phase {
            guard phase == "tasks", let work else { throw UsageError("--phase tasks needs --work") }
            let report = try SoakTasks(count: tasks, concurrent: concurrent, seed: seed, device: device, kinds: kinds, trim: trim, work: work).run()
            print(String(decoding: try JSONEncoder().encode(report), as: UTF8.self))
            return 0
        }
        guard let exe = executablePath() else { throw UpdraftError(.io, "cannot find the benchmark's own executable to run the task phase") }
        let updraft = URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent("updraft").path
        guard FileManager.default.isExecutableFile(atPath: updraft) else {
            throw UpdraftError(.io, "the soak's killed runs need the `updraft` executable beside \(exe)",
                               hint: "build it too: swift build [-c release] (both products)")
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-soak-\(getpid())", isDirectory: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let images = folder.appendingPathComponent("images", isDirectory: true)
        try SoakInputs.writeImages(to: images, perClass: 8, seed: seed)
        _ = try SoakInputs.unreadableImageFolders(from: images, to: folder)
        let start = DispatchTime.now().uptimeNanoseconds

        // The tasks in a child process, the killed runs from here meanwhile.
        final class Phase: @unchecked Sendable { var result: Result<ChildResult, Error>? }  // set before the semaphore, read after
        let phase = Phase()
        let done = DispatchSemaphore(value: 0)
        var arguments = ["soak", "--phase", "tasks", "--tasks", "\(tasks)", "--concurrent", "\(concurrent)", "--seed", "\(seed)",
                         "--work", folder.path]
        if let device { arguments += ["--device", device] }
        if let kinds { arguments += ["--kinds", kinds.map(\.rawValue).joined(separator: ",")] }
        if trim { arguments.append("--trim") }
        let childArguments = arguments
        Thread.detachNewThread {
            phase.result = Result { try runChild(executable: exe, arguments: childArguments, captureStandardError: true) }
            done.signal()
        }
        let killReport = try SoakKills(updraft: updraft, kills: kills, seed: seed, device: device, work: folder).run()
        done.wait()
        let child = try phase.result!.get()
        let line = child.standardOutput.split(separator: "\n").last(where: { $0.hasPrefix("{") })
        let taskReport = child.status == 0 && !child.signalled ? line.flatMap { try? JSONDecoder().decode(SoakTasks.Report.self, from: Data($0.utf8)) } : nil
        if taskReport == nil {
            printError("the task phase ended \(child.signalled ? "by signal" : "with status") \(child.status): \(child.standardError.suffix(2000))")
        }
        let report = makeReport(taskReport, kills: killReport, seconds: Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let encoded = try encoder.encode(report)
        if let path = jsonOut { try writeAtomically(encoded, to: URL(fileURLWithPath: path)) }
        print(json ? String(decoding: encoded, as: UTF8.self) : table(report) + (jsonOut.map { "\nJSON report: \($0)" } ?? ""))
        return report.passed ? 0 : 1
    }

    func makeReport(_ t: SoakTasks.Report?, kills k: SoakKills.Report, seconds: Double) -> Report {
        let samples = t?.residentMiB ?? []
        let tail = Array(samples.dropFirst(samples.count / 10))
        let slope = Self.slope(tail)
        let judged = tasks >= 100 && slope != nil
        var report = Report(seed: seed, tasks: tasks, concurrent: concurrent, device: device ?? "cpu", seconds: seconds, crashes: t == nil ? 1 : 0,
                            taskPhase: t, kills: k, rssSlopeMiBPerTask: slope, rssSlopeTasks: tail.count,
                            rssFirstMiB: tail.first, rssLastMiB: tail.last, rssSlopeJudged: judged, maxRssSlope: maxSlope, passed: false)
        let counted = report.crashes + k.crashes + k.failures + k.corruptFiles + k.lostModels + k.resumesDiffering
            + (t.map { $0.unexpectedFailures + $0.lostModels + $0.corruptModels + $0.unchangedModels + $0.repeatsDiffering
                      + $0.refusedUnclearly + $0.acceptedBadInputs } ?? 0)
        report.passed = counted == 0 && k.kills >= kills && (!judged || slope! <= maxSlope)
        return report
    }

    /// The least-squares slope of `values` against their index (nil for fewer than two).
    static func slope(_ values: [Double]) -> Double? {
        guard values.count >= 2 else { return nil }
        let n = Double(values.count), meanX = (n - 1) / 2, meanY = values.reduce(0, +) / n
        var sxy = 0.0, sxx = 0.0
        for (i, y) in values.enumerated() {
            sxy += (Double(i) - meanX) * (y - meanY)
            sxx += (Double(i) - meanX) * (Double(i) - meanX)
        }
        return sxy / sxx
    }

    func table(_ r: Report) -> String {
        let t = r.taskPhase, k = r.kills
        let f = { (x: Double?) in x.map { String(format: "%.2f", $0) } ?? "-" }
        let kinds = t.map { $0.kinds.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") } ?? "-"
        var rows: [[String]] = [["soak (seed \(r.seed), device \(r.device))", "count", "must be"]]
        func row(_ name: String, _ value: Int?, _ rule: String = "") { rows.append([name, value.map(String.init) ?? "-", rule]) }
        row("tasks (\(r.concurrent) at a time)", r.tasks)
        row("tasks completed", t?.completed)
        row("tasks cancelled", t?.cancelled)
        row("bad inputs refused with an UpdraftError", t?.refusedClearly)
        row("bad inputs refused otherwise", t?.refusedUnclearly, "0")
        row("bad inputs accepted", t?.acceptedBadInputs, "0")
        row("valid tasks failed", t?.unexpectedFailures, "0")
        row("models written and read back", t?.modelsWritten)
        row("models lost", t?.lostModels, "0")
        row("models corrupt", t?.corruptModels, "0")
        row("completed models unchanged (nothing trained)", t?.unchangedModels, "0")
        row("repeated plans checked", t?.repeatsChecked)
        row("repeated plans differing", t?.repeatsDiffering, "0")
        row("task process crashes", r.crashes, "0")
        row("updraft train runs finished", k.runs)
        row("SIGKILLs delivered", k.kills, ">= \(kills)")
        row("kills that found the run ended", k.finishedBeforeKill)
        row("continued with --resume", k.resumes)
        row("started again (killed before a checkpoint)", k.restarts)
        row("finished runs identical to the uninterrupted", k.identical)
        row("finished runs differing", k.resumesDiffering, "0")
        row("updraft train crashes / failures", k.crashes + k.failures, "0")
        row("files a kill left corrupt / models lost", k.corruptFiles + k.lostModels, "0")
        var text = formatTable(rows, rightAligned: [1])
        text += "\nkinds: \(kinds)"
        text += "\nRSS slope over the last \(r.rssSlopeTasks) tasks: \(f(r.rssSlopeMiBPerTask)) MiB/task (\(f(r.rssFirstMiB)) -> \(f(r.rssLastMiB)) MiB)"
            + (r.rssSlopeJudged ? ", target <= \(r.maxRssSlope)" : ", not judged under 100 tasks")
        text += String(format: "\ntime: %.1f s (tasks %.1f s, kills %.1f s)", r.seconds, t?.seconds ?? 0, k.seconds)
        let problems = (t?.problems ?? []) + k.problems
        if !problems.isEmpty { text += "\nproblems:\n" + problems.map { "  " + $0 }.joined(separator: "\n") }
        text += "\n" + (r.passed ? "passed" : "FAILED")
        return text
    }
}
