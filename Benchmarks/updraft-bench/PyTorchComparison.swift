import Foundation
import Updraft

/// Runs Benchmarks/pytorch_baseline.py (the same workload in PyTorch) and pairs its runs with
/// Updraft's: CPU with the CPU backend, CUDA with OpenCL GPUs.
enum PyTorchComparison {
    struct Run {
        var device: String
        var kind: String            // "cpu" or "cuda"
        var threads: Int?
        var imagesPerSecond: Double
        var firstEpochMilliseconds: Double?
        var steadyEpochMilliseconds: Double?
        var torchVersion: String?
        /// The script's object as it printed it, for `--json`.
        var raw: [String: Any]
    }

    struct Outcome {
        var command: [String]
        var runs: [Run] = []
        /// Why there are no (or fewer) runs: PyTorch missing, the script missing or failing.
        var notes: [String] = []
    }

    /// A pairing of one Updraft run with one PyTorch run on the matching kind of device.
    struct Ratio: Codable {
        var updraftComputeUnits: String
        var updraftDevice: String
        var featureCache: Bool
        var pytorchDevice: String
        var updraftImagesPerSecond: Double
        var pytorchImagesPerSecond: Double
        var ratio: Double
        var target: Double?
        var meetsTarget: Bool?

        enum CodingKeys: String, CodingKey {
            case updraftComputeUnits = "compute_units", updraftDevice = "device", featureCache = "feature_cache"
            case pytorchDevice = "pytorch_device", updraftImagesPerSecond = "images_per_second"
            case pytorchImagesPerSecond = "pytorch_images_per_second", ratio, target, meetsTarget = "meets_target"
        }
    }

    /// The torchvision architectures pytorch_baseline.py --arch runs.
    static let architectures = ["mobilenet_v2", "resnet18"]

    /// What the script builds: its SqueezeNet (arch nil) or a torchvision model with only its last layer trained.
    struct Model {
        var arch: String?
        var size: Int
        var batch: Int
        var classes: Int
        var relu6AsReLU: Bool

        var arguments: [String] {
            guard let arch else { return [] }
            return ["--arch", arch, "--size", String(size), "--batch", String(batch), "--classes", String(classes)]
                + (relu6AsReLU ? ["--relu6", "relu"] : [])
        }
    }

    /// The targets for the CPU path on SqueezeNet: 3x PyTorch without the feature cache, 10x
    /// with it. For converted torchvision models (issue 11), 2x without the cache; none with it.
    static func cpuTarget(featureCache: Bool) -> Double { featureCache ? 10 : 3 }

    /// `explicit`, else Benchmarks/pytorch_baseline.py under the working directory, else under a
    /// folder above the executable (the repository root of a `.build/<config>/updraft-bench`).
    static func locateScript(explicit: String?, name: String = "pytorch_baseline.py") -> String? {
        let fm = FileManager.default
        if let explicit { return explicit }
        let relative = "Benchmarks/" + name
        var candidates = [URL(fileURLWithPath: fm.currentDirectoryPath).appendingPathComponent(relative)]
        if let exe = executablePath() {
            var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
            for _ in 0..<6 {
                candidates.append(dir.appendingPathComponent(relative))
                dir = dir.deletingLastPathComponent()
            }
        }
        return candidates.first { fm.fileExists(atPath: $0.path) }?.path
    }

    /// Runs the script; never throws: whatever goes wrong becomes a note.
    static func run(script: String, images: Int, epochs: Int, threads: Int, devices: [String], data: String? = nil,
                    model: Model? = nil) -> Outcome {
        let args = [script, "--images", String(images), "--epochs", String(epochs), "--threads", String(threads),
                    "--devices", devices.joined(separator: ",")] + (data.map { ["--data", $0] } ?? []) + (model?.arguments ?? [])
        var outcome = Outcome(command: ["python3"] + args)
        guard FileManager.default.fileExists(atPath: script) else {
            outcome.notes.append("PyTorch comparison skipped: \(script) does not exist (give --pytorch-script PATH)")
            return outcome
        }
        let result: ChildResult
        do {
            result = try runChild(executable: "/usr/bin/env", arguments: ["python3"] + args, captureStandardError: true)
        } catch {
            outcome.notes.append("PyTorch comparison skipped: cannot start python3: \(error)")
            return outcome
        }
        let stderrTail = lastLine(result.standardError)
        if result.status == 127 {
            outcome.notes.append("PyTorch comparison skipped: python3 is not installed")
            return outcome
        }
        guard let line = result.standardOutput.split(separator: "\n").last(where: { $0.hasPrefix("{") }),
              let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            outcome.notes.append("PyTorch comparison failed: the script exited with status \(result.status)"
                                 + (stderrTail.isEmpty ? "" : ": \(stderrTail)"))
            return outcome
        }
        if let error = object["error"] as? String {
            outcome.notes.append("PyTorch comparison skipped: \(error)")
            return outcome
        }
        for raw in object["runs"] as? [[String: Any]] ?? [] {
            guard let ips = raw["images_per_second"] as? Double else { continue }
            outcome.runs.append(Run(device: raw["device"] as? String ?? "?", kind: raw["kind"] as? String ?? "?",
                                    threads: raw["threads"] as? Int, imagesPerSecond: ips,
                                    firstEpochMilliseconds: raw["first_epoch_ms"] as? Double,
                                    steadyEpochMilliseconds: raw["steady_epoch_ms"] as? Double,
                                    torchVersion: raw["torch"] as? String, raw: raw))
        }
        if devices.contains("cuda"), !outcome.runs.contains(where: { $0.kind == "cuda" }) {
            outcome.notes.append("PyTorch has no CUDA device here: the OpenCL GPU runs have nothing to compare with")
        }
        if outcome.runs.isEmpty { outcome.notes.append("PyTorch comparison: the script reported no runs") }
        return outcome
    }

    /// CPU backend runs against PyTorch's CPU run, OpenCL GPU runs against its CUDA run.
    /// - Parameter cpuTarget: the target ratio of a CPU run with or without the feature cache (nil: none).
    static func ratios(updraft: [EpochsRunResult], pytorch: [Run],
                       cpuTarget: (Bool) -> Double? = { cpuTarget(featureCache: $0) }) -> [Ratio] {
        var out: [Ratio] = []
        for r in updraft {
            let isCPU = r.deviceIndex == nil
            guard isCPU || r.deviceKind == "gpu",
                  let p = pytorch.first(where: { $0.kind == (isCPU ? "cpu" : "cuda") }), p.imagesPerSecond > 0 else { continue }
            let ratio = r.imagesPerSecond / p.imagesPerSecond
            let target = isCPU ? cpuTarget(r.featureCache) : nil
            out.append(Ratio(updraftComputeUnits: r.computeUnits, updraftDevice: r.device, featureCache: r.featureCache,
                             pytorchDevice: p.device, updraftImagesPerSecond: r.imagesPerSecond,
                             pytorchImagesPerSecond: p.imagesPerSecond, ratio: ratio, target: target,
                             meetsTarget: target.map { ratio >= $0 }))
        }
        return out
    }

    private static func lastLine(_ text: String) -> String {
        text.split(separator: "\n").last.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
    }
}

/// The path of the running executable.
func executablePath() -> String? {
    if let p = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") { return p }
    return CommandLine.arguments.first.map { URL(fileURLWithPath: $0).standardizedFileURL.path }
}

struct ChildResult {
    var status: Int32
    /// True when the child was killed by a signal (`status` is then the signal number).
    var signalled: Bool
    var standardOutput: String
    var standardError: String
}

/// Runs a program to completion, capturing its standard output (and standard error when asked;
/// otherwise it goes to ours, so a child's progress lines show as they come).
func runChild(executable: String, arguments: [String], captureStandardError: Bool) throws -> ChildResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let out = Pipe()
    process.standardOutput = out
    let err = Pipe()
    if captureStandardError { process.standardError = err }
    try process.run()
    // Read both pipes to the end before waiting, on separate threads, so a chatty child never blocks.
    final class Collected: @unchecked Sendable { var data = Data() }  // written before the semaphore, read after
    let errData = Collected()
    let errDone = DispatchSemaphore(value: 0)
    if captureStandardError {
        Thread.detachNewThread {
            errData.data = err.fileHandleForReading.readDataToEndOfFile()
            errDone.signal()
        }
    }
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    if captureStandardError { errDone.wait() }
    process.waitUntilExit()
    return ChildResult(status: process.terminationStatus, signalled: process.terminationReason == .uncaughtSignal,
                       standardOutput: String(decoding: outData, as: UTF8.self),
                       standardError: String(decoding: errData.data, as: UTF8.self))
}
