import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft-bench firstuse`: what a newcomer's first runs cost. Each job runs as `updraft` in a new
/// process, first with empty caches (a fresh UPDRAFT_CACHE_DIR and POCL_CACHE_DIR: calibration,
/// program builds and the driver's own compiles all happen), then again warm, under the default
/// compute units and under cpuOnly: a 20-image k-NN pipeline update, `predict` of one image, one
/// epoch of a small SqueezeNet. With `--device N` each job also runs pinned to OpenCL device N (what
/// a first run on that device pays, where the default compute units would not pick it). The device is
/// the one `updraft` reports; set-up is the cold run's time over the warm one's (what the first run
/// pays once), work the warm run's.
let firstUseCommand = CLICommand(CommandSpec(
    name: "firstuse",
    summary: "Time a newcomer's first runs in fresh processes, cold (empty caches) then warm, default compute units against cpuOnly.",
    options: OptionSpec.table("""
        --updraft PATH  the updraft executable (default: the one beside this binary)
        --data DIR      image class folders to take the examples from (default Tests/Data/digits/train)
        --rounds N      cold+warm rounds per job and compute units, the median kept (default 1)
        --device N      also run each job pinned to OpenCL device N (`updraft devices`)
        --json          print JSON instead of a table
        """)
)) { args in
    let here = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
    // In a `make dist` tree this binary is libexec/updraft-bench: the launcher bin/updraft sets up the bundled libraries.
    let launcher = here.deletingLastPathComponent().appendingPathComponent("bin/updraft")
    let updraft = args.value("updraft") ?? (here.lastPathComponent == "libexec" && FileManager.default.isExecutableFile(atPath: launcher.path)
        ? launcher.path : here.appendingPathComponent("updraft").path)
    guard FileManager.default.isExecutableFile(atPath: updraft) else {
        throw UpdraftError(.io, "no updraft executable at \(updraft)", hint: "build it (swift build -c release) or pass --updraft PATH")
    }
    let rounds = try args.int("rounds") ?? 1
    guard rounds >= 1 else { throw UsageError("--rounds must be at least 1") }
    let data = URL(fileURLWithPath: args.value("data") ?? "Tests/Data/digits/train")
    let work = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-firstuse-\(getpid())")
    defer { try? FileManager.default.removeItem(at: work) }
    let bench = try FirstUseBench(updraft: updraft, data: data, folder: work)
    var rows: [FirstUseBench.Row] = []
    let pinned = try args.int("device").map { "device \($0)" }
    for job in FirstUseBench.Job.allCases {
        for units in ["all", "cpuOnly"] + (pinned.map { [$0] } ?? []) {
            rows.append(try bench.measure(job, computeUnits: units, rounds: rounds))
        }
    }
    if args.flag("json") {
        let object: [String: Any] = ["host": HostInfo.current.cpuName, "cores": HostInfo.current.cores, "version": UpdraftVersion.description,
                                     "rows": rows.map(\.json)]
        print(String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys]), as: UTF8.self))
    } else {
        var table = [["job", "compute units", "device (cold)", "device (warm)", "cold s", "warm s", "set-up s"]]
        for r in rows {
            table.append([r.job.description, r.computeUnits, r.coldDevice, r.warmDevice, String(format: "%.2f", r.coldSeconds),
                          String(format: "%.2f", r.warmSeconds), String(format: "%.2f", r.coldSeconds - r.warmSeconds)])
        }
        print(formatTable(table, rightAligned: [4, 5, 6]), terminator: "")
        for job in FirstUseBench.Job.allCases {
            guard let all = rows.first(where: { $0.job == job && $0.computeUnits == "all" }),
                  let cpu = rows.first(where: { $0.job == job && $0.computeUnits == "cpuOnly" }) else { continue }
            print(String(format: "%@: default compute units cold %.2f s against cpuOnly %.2f s (+%.2f s); warm %.2f s against %.2f s",
                         job.description, all.coldSeconds, cpu.coldSeconds, all.coldSeconds - cpu.coldSeconds, all.warmSeconds, cpu.warmSeconds))
        }
    }
    return 0
}

/// The models, data and runs of `updraft-bench firstuse`.
struct FirstUseBench {
    enum Job: String, CaseIterable, CustomStringConvertible {
        case knnUpdate, predict, epoch
        var description: String {
            switch self {
            case .knnUpdate: return "k-NN pipeline update, 20 images"
            case .predict: return "predict, 1 image"
            case .epoch: return "1 epoch, small SqueezeNet"
            }
        }
    }

    struct Row {
        var job: Job
        var computeUnits: String
        var coldSeconds: Double, warmSeconds: Double
        var coldDevice: String, warmDevice: String
        var json: [String: Any] {
            ["job": job.rawValue, "description": job.description, "computeUnits": computeUnits, "coldSeconds": coldSeconds,
             "warmSeconds": warmSeconds, "setupSeconds": coldSeconds - warmSeconds, "coldDevice": coldDevice, "warmDevice": warmDevice]
        }
    }

    let updraft: String
    let folder: URL
    let fewShot: URL
    let image: URL

    /// Makes the models (a SqueezeNet at 64x64 for 4 classes, a k-NN pipeline on its pool5) and a
    /// folder of 5 images of each of 4 classes.
    init(updraft: String, data: URL, folder: URL) throws {
        self.updraft = updraft
        self.folder = folder
        fewShot = folder.appendingPathComponent("fewshot")
        let fm = FileManager.default
        let classes = try fm.contentsOfDirectory(atPath: data.path).filter { !$0.hasPrefix(".") }.sorted().prefix(4)
        guard classes.count == 4 else {
            throw UpdraftError(.io, "\(data.path) holds \(classes.count) class folders; the benchmark takes 5 images from each of 4",
                               hint: "run from the repository root, or pass --data DIR")
        }
        var first: URL?
        for c in classes {
            let out = fewShot.appendingPathComponent(c)
            try fm.createDirectory(at: out, withIntermediateDirectories: true)
            for f in try fm.contentsOfDirectory(atPath: data.appendingPathComponent(c).path).sorted().prefix(5) {
                let source = data.appendingPathComponent(c).appendingPathComponent(f)
                try fm.copyItem(at: source, to: out.appendingPathComponent(f))
                first = first ?? source
            }
        }
        image = try first.unwrapped("no image in \(data.path)")
        let labels = classes.joined(separator: ",")
        let setupCache = folder.appendingPathComponent("setup-cache").path
        _ = try run(["create", "squeezenet", "--labels", labels, "--input-size", "64", "--seed", "1",
                     "--out", model("squeezenet").path], cache: setupCache, pocl: setupCache)
        _ = try run(["create", "knn", "--feature-extractor", model("squeezenet").path, "--layer", "pool5", "--l2-normalize",
                     "--neighbors", "1", "--out", model("knn").path], cache: setupCache, pocl: setupCache)
    }

    func model(_ name: String) -> URL { folder.appendingPathComponent("\(name).mlmodel") }

    /// The job's arguments under `computeUnits` ("all", "cpuOnly", or "device N": pinned with `--device N`).
    func arguments(_ job: Job, computeUnits: String) -> [String] {
        let placement = computeUnits.hasPrefix("device ") ? ["--device", String(computeUnits.dropFirst("device ".count))]
            : ["--compute-units", computeUnits]
        switch job {
        case .knnUpdate:
            return ["train", model("knn").path, "--train", fewShot.path] + placement
                + ["--out", folder.appendingPathComponent("knn-out.mlmodel").path]
        case .predict:
            return ["predict", model("squeezenet").path, image.path, "--json"] + placement
        case .epoch:
            return ["train", model("squeezenet").path, "--train", fewShot.path, "--epochs", "1", "--batch-size", "8"] + placement
                + ["--out", folder.appendingPathComponent("epoch-out.mlmodel").path]
        }
    }

    /// `rounds` pairs of a cold run (new, empty caches) and a warm one (the same caches); the medians.
    func measure(_ job: Job, computeUnits: String, rounds: Int) throws -> Row {
        var cold: [(Double, String)] = [], warm: [(Double, String)] = []
        for round in 0..<rounds {
            let caches = folder.appendingPathComponent("caches-\(job.rawValue)-\(computeUnits)-\(round)")
            let (updraftCache, pocl) = (caches.appendingPathComponent("updraft").path, caches.appendingPathComponent("pocl").path)
            cold.append(try run(arguments(job, computeUnits: computeUnits), cache: updraftCache, pocl: pocl))
            warm.append(try run(arguments(job, computeUnits: computeUnits), cache: updraftCache, pocl: pocl))
            try? FileManager.default.removeItem(at: caches)
        }
        func median(_ xs: [(Double, String)]) -> (Double, String) { xs.sorted { $0.0 < $1.0 }[xs.count / 2] }
        let (c, w) = (median(cold), median(warm))
        return Row(job: job, computeUnits: computeUnits, coldSeconds: c.0, warmSeconds: w.0, coldDevice: c.1, warmDevice: w.1)
    }

    /// Runs `updraft` with `arguments` and the given cache folders; its wall seconds and the device it reported.
    func run(_ arguments: [String], cache: String, pocl: String) throws -> (seconds: Double, device: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: updraft)
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["UPDRAFT_CACHE_DIR"] = cache
        environment["POCL_CACHE_DIR"] = pocl
        environment.removeValue(forKey: "UPDRAFT_DEVICE")
        process.environment = environment
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        let start = DispatchTime.now().uptimeNanoseconds
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        let seconds = Double(DispatchTime.now().uptimeNanoseconds &- start) * 1e-9
        guard process.terminationStatus == 0 else {
            throw UpdraftError(.io, "updraft \(arguments.joined(separator: " ")) failed (exit \(process.terminationStatus)):\n\(text)")
        }
        return (seconds, Self.device(in: text))
    }

    /// The device a run reports: predict's JSON "device", else the last column of a training epoch's row.
    static func device(in output: String) -> String {
        for line in output.split(separator: "\n") {
            if let range = line.range(of: "\"device\":\"") {
                return String(line[range.upperBound...].prefix { $0 != "\"" })
            }
        }
        let epochRows = output.split(separator: "\n").filter { $0.trimmingCharacters(in: .whitespaces).first?.isNumber ?? false }
        // epoch, train loss, train acc, val loss, val acc, images/s, then the device (which may hold spaces).
        guard let row = epochRows.last?.split(separator: " "), row.count > 6 else { return "?" }
        return row[6...].joined(separator: " ")
    }
}

private extension Optional {
    func unwrapped(_ message: String) throws -> Wrapped {
        guard let self else { throw UpdraftError(.io, message) }
        return self
    }
}
