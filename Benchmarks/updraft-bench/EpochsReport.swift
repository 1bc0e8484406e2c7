import Foundation
import Updraft

/// The table and the JSON document of `updraft-bench epochs`.
extension EpochsBench {
    func textReport(results: [EpochsRunResult], work: StepWork, pytorch: PyTorchComparison.Outcome?,
                    ratios: [PyTorchComparison.Ratio], notes: [String]) -> String {
        let w = workload
        var out = "\(w.title), \(w.inputDescription) input, \(w.classes) classes, batch \(w.batch), \(w.optimizer.uppercased())"
            + (w.momentum.map { " momentum \($0)" } ?? "") + (w.learningRate.map { " learning rate \($0)" } ?? "") + ", "
            + "\(images) \(data.map { "image files from \($0) (decoded every epoch that needs them)" } ?? "synthetic images"), \(epochs) epoch\(epochs == 1 ? "" : "s") per run\n"
        out += work.summary + "\n"
        out += "CPU vector level: \(CPUVectorLevel.summary); oneDNN code: \(OneDNN.isa ?? "unavailable")\n\n"
        if !results.isEmpty {
            var rows: [[String]] = [["units", "device", "cache", "setup ms", "first ms", "steady ms", "first img/s", "steady img/s",
                                     "GFLOP/img", "GFLOP/s", "% SGEMM", "peak host", "backend buffers", "device mem", "loss"]]
            for r in results {
                rows.append([
                    r.computeUnits, r.deviceIndex.map { "opencl \($0): \(r.device)" } ?? "cpu (\(r.threads ?? 0) thread\(r.threads == 1 ? "" : "s"))",
                    r.featureCache ? "on" : "off", r.setupMilliseconds.map { String(format: "%.0f", $0) } ?? "n/a",
                    String(format: "%.0f", r.firstEpochMilliseconds), String(format: "%.0f", r.steadyEpochMilliseconds),
                    String(format: "%.1f", r.firstEpochImagesPerSecond), String(format: "%.1f", r.imagesPerSecond),
                    String(format: "%.3f", r.gflopPerImageSteady), String(format: "%.1f", r.effectiveGflops),
                    r.referenceGemmGflops.map { String(format: "%.0f%% of %.0f", 100 * r.effectiveGflops / $0, $0) } ?? "n/a",
                    r.peakHostBytes.map { formatBytes(UInt64($0)) } ?? "n/a",
                    formatBytes(UInt64(r.backendBufferBytes)),
                    r.deviceMemoryBytes.map { formatBytes(UInt64($0)) } ?? "n/a",
                    r.meanLoss.last.map { String(format: "%.4f", $0) } ?? "",
                ])
            }
            out += formatTable(rows, rightAligned: [3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14])
            let scopes = Set(results.map(\.peakHostScope))
            let scope = scopes.count == 1 ? scopes.first! : "the process so far (--in-process: each run's figure includes the runs before it)"
            out += "\nsetup = preparing the devices before the first epoch (the CPU's oneDNN primitives for every layer and batch size),\n"
            out += "  timed apart: no epoch's time, op breakdown or profile row includes it;\n"
            out += "steady = best epoch after the first; GFLOP/img = work per image in the steady state (cached step with the cache);\n"
            out += "% SGEMM = steady GFLOP/s against the CPU backend's SGEMM rate at conv10's shape, measured right after the run\n"
            out += "  (the ceiling on this machine at that moment: it moves with whatever else runs on the cores);\n"
            out += "peak host = peak resident memory of \(scope), including \(data == nil ? formatBytes(UInt64(results[0].datasetBytes)) + " of synthetic images" : "the decoded-image cache")"
            out += ";\nbackend buffers = peak bytes in buffers the executor allocates (device memory on OpenCL; ops' internal scratch not included;\n"
            out += "  with the cache, its device tier's arenas are among them).\n"
            for r in results {
                guard let faults = r.epochMinorFaults, let cpu = r.epochCPUSeconds, !faults.isEmpty else { continue }
                out += "per epoch, \(r.computeUnits) \(r.deviceIndex.map { "opencl \($0)" } ?? "cpu"), cache \(r.featureCache ? "on" : "off"): "
                    + "minor page faults " + faults.map(String.init).joined(separator: ", ")
                    + "; CPU seconds " + cpu.map { String(format: "%.2f", $0) }.joined(separator: ", ") + "\n"
            }
            for r in results where r.featureCache {
                let host = r.featureCacheBytes - r.featureCacheDeviceBytes
                out += "feature cache, \(r.computeUnits) \(r.deviceIndex.map { "opencl \($0)" } ?? "cpu"): "
                    + (r.featureCacheDevice.map { "\(formatBytes(UInt64(r.featureCacheDeviceBytes))) in the device tier on \($0), " } ?? "no device tier, ")
                    + "\(formatBytes(UInt64(host))) in host arrays\n"
            }
            for r in results {
                guard let profile = r.profile else { continue }
                out += "\nprofile: \(r.computeUnits) \(r.deviceIndex.map { "opencl \($0)" } ?? "cpu"), feature cache \(r.featureCache ? "on" : "off")"
                    + ", the epochs after the first\n" + profile.table()
            }
            for r in results {
                guard let epochs = r.opBreakdown, !epochs.isEmpty else { continue }
                out += "\nwhere the time goes: \(r.computeUnits) \(r.deviceIndex.map { "opencl \($0)" } ?? "cpu"), "
                    + "feature cache \(r.featureCache ? "on" : "off") (each op waited for)\n"
                let shown = epochs.count > 1 ? [(0, epochs[0]), (epochs.count - 1, epochs[epochs.count - 1])] : [(0, epochs[0])]
                for (i, e) in shown {
                    out += String(format: "  epoch %d: %.0f ms, outside backend ops %.0f ms (%.0f%%)\n", i + 1, e.epochMilliseconds,
                                  e.outsideOpsMilliseconds, 100 * e.outsideOpsMilliseconds / max(e.epochMilliseconds, 1e-9))
                    for op in e.ops.prefix(12) {
                        out += String(format: "    %8.1f ms %5.1f%% %5d calls  ", op.ms, 100 * op.ms / max(e.epochMilliseconds, 1e-9), op.calls)
                            + op.op + "\n"
                    }
                    if e.ops.count > 12 {
                        let rest = e.ops.dropFirst(12).reduce(0) { $0 + $1.ms }
                        out += String(format: "    %8.1f ms in %d other ops\n", rest, e.ops.count - 12)
                    }
                }
            }
        } else {
            out += "no run completed.\n"
        }
        if let pytorch {
            out += "\nPyTorch (\(pytorch.command.joined(separator: " "))):\n"
            for p in pytorch.runs {
                out += "  \(p.device)" + (p.threads.map { " (\($0) threads)" } ?? "")
                    + String(format: ": %.1f images/s (first epoch %.0f ms, steady %.0f ms)", p.imagesPerSecond,
                             p.firstEpochMilliseconds ?? 0, p.steadyEpochMilliseconds ?? 0)
                    + (p.torchVersion.map { ", torch \($0)" } ?? "") + "\n"
            }
            if !ratios.isEmpty {
                out += "Updraft / PyTorch throughput (steady state):\n"
                for r in ratios {
                    var line = "  \(r.updraftComputeUnits) \(r.updraftDevice), feature cache \(r.featureCache ? "on" : "off") vs \(r.pytorchDevice): "
                        + String(format: "%.1f / %.1f = %.2fx", r.updraftImagesPerSecond, r.pytorchImagesPerSecond, r.ratio)
                    if let t = r.target { line += String(format: " (target %.0fx: ", t) + (r.ratio >= t ? "met)" : "not met)") }
                    out += line + "\n"
                }
            }
            if data != nil {
                // From files, the first epoch is what a user waits for: listing and decoding included on both sides.
                out += "First epoch from the files, PyTorch time / Updraft time (target 3x):\n"
                for r in results where r.deviceKind == "cpu" {
                    guard let run = pytorch.runs.first(where: { $0.kind == "cpu" }), let theirs = run.firstEpochMilliseconds else { continue }
                    out += "  \(r.computeUnits) \(r.device), feature cache \(r.featureCache ? "on" : "off"): "
                        + String(format: "%.0f ms / %.0f ms = %.2fx\n", theirs, r.firstEpochMilliseconds, theirs / r.firstEpochMilliseconds)
                }
            }
        }
        if !notes.isEmpty {
            out += "\n" + notes.map { "note: \($0)" }.joined(separator: "\n") + "\n"
        }
        return out
    }

    func jsonReport(results: [EpochsRunResult], work: StepWork, pytorch: PyTorchComparison.Outcome?,
                    ratios: [PyTorchComparison.Ratio], notes: [String]) throws -> String {
        func object<T: Encodable>(_ value: T) throws -> Any {
            try JSONSerialization.jsonObject(with: JSONEncoder().encode(value))
        }
        var workObject = try object(work) as? [String: Any] ?? [:]
        workObject["full_step_flop"] = work.fullStep
        workObject["cached_step_flop"] = work.cachedStep
        var document: [String: Any] = [
            "framework": "updraft",
            "workload": [
                "model": workload.modelName, "model_path": workload.path as Any, "input": workload.inputDescription,
                "classes": workload.classes, "trained": workload.trained, "batch": workload.batch,
                "optimizer": workload.optimizer, "learning_rate": workload.learningRate as Any, "momentum": workload.momentum as Any,
                "images": images, "epochs": epochs,
            ] as [String: Any],
            "runs": try results.map(object),
            "work": workObject,
            "notes": notes,
            // The CPU backend's vector level (CPUVectorLevel); children inherit UPDRAFT_CPU_LEVEL, so one for all runs.
            "cpu_vector_level": CPUVectorLevel.active.description,
            "onednn_isa": OneDNN.isa ?? "unavailable",
        ]
        if let pytorch {
            document["pytorch"] = ["command": pytorch.command, "runs": pytorch.runs.map(\.raw)] as [String: Any]
            document["ratios"] = try ratios.map(object)
        }
        let data = try JSONSerialization.data(withJSONObject: document, options: [.prettyPrinted, .sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }
}
