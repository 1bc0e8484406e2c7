import Foundation
import Updraft
import UpdraftCommandLine

let devicesCommand = CLICommand(CommandSpec(
    name: "devices",
    summary: "List OpenCL platforms and devices, and the CPU, with their calibrated speed and what each compute-units setting picks.",
    options: [OptionSpec("json", help: "print JSON instead of a table")],
    discussion: """
    After the devices, shows each device's calibrated speed (measured once, cached in \
    $\(CalibrationCache.directoryVariable), $XDG_CACHE_HOME/updraft or ~/.cache/updraft) and the device(s) \
    each --compute-units setting would pick for a typical workload (SqueezeNet 1.1 at batch 64). \
    The CPU line names the CPU backend's vector level (baseline, avx2 or avx512: the best this CPU runs, \
    or a lower one forced by UPDRAFT_CPU_LEVEL).
    """
)) { args in
    let host = HostInfo.current
    var devices: [OpenCLDevice] = []
    var problem: String? = nil
    do { devices = try OpenCLRuntime.devices() } catch { problem = "OpenCL is unavailable: \(error)" }
    if devices.isEmpty && problem == nil {
        problem = "no OpenCL platform or device found; install pocl-opencl-icd (CPU) or a GPU driver's OpenCL ICD. The CPU path works without one."
    }
    if args.flag("json") {
        var list: [[String: Any]] = devices.map { d in
            let i = d.info
            return ["index": i.index, "platform": i.platformName, "platformVersion": i.platformVersion,
                    "name": i.name, "vendor": i.vendor, "type": i.type.rawValue,
                    "computeUnits": i.computeUnits, "clockMHz": i.clockMHz, "globalMemoryBytes": i.globalMemory,
                    "localMemoryBytes": i.localMemory, "maxWorkGroupSize": i.maxWorkGroupSize,
                    "openCLC": i.openCLCVersion, "driver": i.driverVersion, "kernelTuning": kernelTuning(i)]
        }
        list.sort { ($0["index"] as! Int) < ($1["index"] as! Int) }
        var root: [String: Any] = ["cpu": ["name": host.cpuName, "cores": host.cores, "threads": HostInfo.defaultCPUThreads,
                                           "memoryBytes": host.memoryBytes,
                                           "vectorLevel": CPUVectorLevel.active.description,
                                           "supportedVectorLevel": CPUVectorLevel.supported.description,
                                           "oneDNN": oneDNNJSON()],
                                   "opencl": list]
        if let problem { root["openclProblem"] = problem }
        let scheduling = schedulingSummary(host: host, devices: devices, problem: problem)
        root["calibration"] = scheduling.profiles.map(profileJSON)
        root["scheduling"] = scheduling.json
        root["warnings"] = (CPUVectorLevel.warning.map { [$0] } ?? []) + scheduling.warnings
        let programs = ProgramBinaryCache.standard()
        let usage = programs?.usage ?? (entries: 0, bytes: 0)
        root["programCache"] = ["enabled": programs != nil, "entries": usage.entries, "bytes": usage.bytes,
                                "folder": programs?.directory.path ?? ""] as [String: Any]
        let data = try JSONSerialization.data(withJSONObject: root, options: [.prettyPrinted, .sortedKeys])
        print(String(decoding: data, as: UTF8.self))
        return 0
    }
    print("CPU: \(host.cpuName), \(host.cores) cores, \(formatBytes(host.memoryBytes)) memory; "
          + "the CPU backend runs \(HostInfo.defaultCPUThreads) thread(s) (\(HostInfo.threadsVariable) sets it)")
    print("CPU vector level: \(CPUVectorLevel.summary); \(CPUVectorLevel.variable)=baseline|avx2|avx512 forces a lower one")
    if let version = OneDNN.version {
        let capped = CPUVectorLevel.active == CPUVectorLevel.supported ? "" : " (capped at the forced vector level)"
        print("oneDNN \(version), code for \(OneDNN.isa ?? "?")\(capped)")
    } else {
        print("oneDNN: unavailable (\(OneDNN.unavailableReason ?? "")); the CPU runs Updraft's own path only")
    }
    print("")
    let scheduling = schedulingSummary(host: host, devices: devices, problem: problem)
    if let problem {
        print("OpenCL: \(problem)")
        print(scheduling.text, terminator: "")
        return 0
    }
    var rows = [["#", "platform", "device", "type", "CUs", "clock", "global mem", "local mem", "max WG", "OpenCL C", "kernels"]]
    for d in devices {
        let i = d.info
        rows.append(["\(i.index)", i.platformName, i.name, i.type.rawValue, "\(i.computeUnits)", "\(i.clockMHz) MHz",
                     formatBytes(i.globalMemory), formatBytes(i.localMemory), "\(i.maxWorkGroupSize)", i.openCLCVersion,
                     kernelTuning(i)])
    }
    print("OpenCL devices:")
    print(formatTable(rows, rightAligned: [0, 4, 5, 6, 7, 8]), terminator: "")
    let programs = ProgramBinaryCache.standard()
    print(programCacheLine(programs ?? ProgramBinaryCache(directory: CacheDirectory.url(environment: [:])), enabled: programs != nil))
    print(scheduling.text, terminator: "")
    return 0
}

/// The CPU's second engine: version and the instruction set its code is generated for, or why it is unavailable.
func oneDNNJSON() -> [String: Any] {
    guard let version = OneDNN.version else { return ["available": false, "problem": OneDNN.unavailableReason ?? ""] }
    return ["available": true, "version": version, "isa": OneDNN.isa ?? ""]
}

/// Calibration of every device and the plan of the typical workload under each compute-units
/// setting, as text and as JSON. Problems become lines of the summary: listing devices never fails.
struct SchedulingSummary {
    var profiles: [DeviceProfile] = []
    var warnings: [String] = []
    var text = ""
    var json: [String: Any] = [:]
}

func schedulingSummary(host: HostInfo, devices: [OpenCLDevice], problem: String?) -> SchedulingSummary {
    var summary = SchedulingSummary()
    let cache = CalibrationCache()
    let inventory = DeviceInventory(host: host, openCL: devices, openCLProblem: problem)
    var text = "\nCalibration (cached in \(cache.fileURL.path)):\n"
    do {
        let setup = try inventory.profiles(computeUnits: .all, pin: nil, cache: cache)
        summary.profiles = setup.profiles
        summary.warnings = setup.warnings.filter { !$0.hasPrefix(problem ?? "\u{0}") }
    } catch {
        summary.warnings.append("calibration failed: \(error)")
    }
    var rows = [["device", "GFLOP/s", "GB/s", "launch µs", "transfer GB/s", "copy µs", "context ms", "program built ms", "cached ms"]]
    for p in summary.profiles {
        rows.append([p.identifier + " " + p.name, number(p.fmaGFLOPS), number(p.bandwidthGBps),
                     number(p.launchLatencyMicroseconds), p.isHost ? "-" : number(p.transferGBps),
                     p.isHost ? "-" : number(p.transferLatencyMicroseconds)]
                    + (p.isHost ? ["-", "-", "-"] : [p.contextSeconds, p.programBuildSeconds, p.programLoadSeconds].map { number($0 * 1e3) }))
    }
    text += formatTable(rows, rightAligned: [1, 2, 3, 4, 5, 6, 7, 8])
    for w in summary.warnings { text += "warning: \(w)\n" }

    var choices: [[String: Any]] = []
    do {
        let workload = try TypicalWorkload.squeezeNet(batchSize: 64)
        text += "\nTypical workload: \(workload.description):\n"
        var table = [["compute units", "picks", "est. ms per batch"]]
        for units in ComputeUnits.allCases {
            do {
                let plan = try Scheduler.plan(graph: workload.graph, batchSize: workload.batchSize, computeUnits: units,
                                              devices: summary.profiles)
                table.append([units.rawValue, plan.summary, String(format: "%.0f", plan.totalMs)])
                choices.append(["computeUnits": units.rawValue, "prefixDevice": plan.prefixDevice.identifier,
                                "tailDevice": plan.tailDevice.identifier, "totalMs": plan.totalMs, "summary": plan.summary])
            } catch {
                table.append([units.rawValue, "error: \(firstErrorLine(error))", "-"])
                choices.append(["computeUnits": units.rawValue, "error": firstErrorLine(error)])
            }
        }
        text += formatTable(table, rightAligned: [2])
        summary.json = ["workload": workload.description, "batchSize": workload.batchSize, "choices": choices]
    } catch {
        text += "\nTypical workload: cannot build SqueezeNet: \(firstErrorLine(error))\n"
        summary.json = ["error": firstErrorLine(error)]
    }
    if let request = DevicePin.request(option: nil) {
        do {
            let pin = try inventory.resolvePin(request)
            let pinned = summary.profiles.first { pin?.matches($0) ?? false }
            text += "\(request.source)=\(request.text) pins every run to \(pinned?.label ?? pin.map { "\($0)" } ?? "?")\n"
            summary.json["pinned"] = pin.map { "\($0)" }
        } catch {
            text += "\(request.source)=\(request.text): \(firstErrorLine(error))\n"
            summary.json["pinError"] = firstErrorLine(error)
        }
    }
    summary.text = text
    return summary
}

private func profileJSON(_ p: DeviceProfile) -> [String: Any] {
    var d: [String: Any] = ["device": p.identifier, "name": p.name, "kind": p.kind.rawValue, "fmaGFLOPS": p.fmaGFLOPS,
                            "bandwidthGBps": p.bandwidthGBps, "launchLatencyMicroseconds": p.launchLatencyMicroseconds,
                            "memoryBytes": p.memoryBytes, "transferGBps": p.transferGBps,
                            "transferLatencyMicroseconds": p.transferLatencyMicroseconds,
                            "matrixEfficiency": p.matrixEfficiency, "contextSeconds": p.contextSeconds,
                            "programBuildSeconds": p.programBuildSeconds, "programLoadSeconds": p.programLoadSeconds]
    if let i = p.openCLIndex { d["index"] = i }
    return d
}

private func number(_ v: Double) -> String { v >= 100 ? String(format: "%.0f", v) : String(format: "%.3g", v) }

private func firstErrorLine(_ error: Error) -> String {
    String(describing: error).split(separator: "\n").first.map(String.init) ?? "\(error)"
}

/// "tuned: N shape classes (space, date)" when `updraft tune` stored variants for this device, driver
/// and kernel source, else "table".
private func kernelTuning(_ info: OpenCLDeviceInfo) -> String {
    let tuning = OpenCLTuning.forDevice(info).withStoredTuning(for: info, cache: CalibrationCache())
    guard let source = tuning.tunedSource else { return "table (run `updraft tune`)" }
    let date = source.split(separator: "(").last.map { "(" + $0 } ?? ""
    return "tuned: \(tuning.tuned.count) shape classes \(date)"
}
