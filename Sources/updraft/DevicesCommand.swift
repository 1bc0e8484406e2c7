import Foundation
import Updraft

let devicesCommand = CLICommand(CommandSpec(
    name: "devices",
    summary: "List OpenCL platforms and devices, and the CPU.",
    options: [OptionSpec("json", help: "print JSON instead of a table")]
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
                    "openCLC": i.openCLCVersion, "driver": i.driverVersion]
        }
        list.sort { ($0["index"] as! Int) < ($1["index"] as! Int) }
        var root: [String: Any] = ["cpu": ["name": host.cpuName, "cores": host.cores, "memoryBytes": host.memoryBytes],
                                   "opencl": list]
        if let problem { root["openclProblem"] = problem }
        let data = try JSONSerialization.data(withJSONObject: root, options: [.prettyPrinted, .sortedKeys])
        print(String(decoding: data, as: UTF8.self))
        return 0
    }
    print("CPU: \(host.cpuName), \(host.cores) cores, \(formatBytes(host.memoryBytes)) memory")
    print("")
    if let problem {
        print("OpenCL: \(problem)")
        return 0
    }
    var rows = [["#", "platform", "device", "type", "CUs", "clock", "global mem", "local mem", "max WG", "OpenCL C"]]
    for d in devices {
        let i = d.info
        rows.append(["\(i.index)", i.platformName, i.name, i.type.rawValue, "\(i.computeUnits)", "\(i.clockMHz) MHz",
                     formatBytes(i.globalMemory), formatBytes(i.localMemory), "\(i.maxWorkGroupSize)", i.openCLCVersion])
    }
    print("OpenCL devices:")
    print(formatTable(rows, rightAligned: [0, 4, 5, 6, 7, 8]), terminator: "")
    return 0
}
