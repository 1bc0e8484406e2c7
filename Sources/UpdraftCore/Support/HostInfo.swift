import Foundation

/// Facts about the host CPU, for `updraft devices`, benchmarks and the scheduler.
public struct HostInfo: Sendable {
    /// The CPU's model name from /proc/cpuinfo ("unknown CPU" when it has none).
    public var cpuName: String
    /// Logical CPU cores the process can use.
    public var cores: Int
    /// Physical memory of the host, in bytes.
    public var memoryBytes: UInt64

    /// This machine's CPU name, core count and memory, read now.
    public static var current: HostInfo {
        var name = "unknown CPU"
        if let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8),
           let line = text.split(separator: "\n").first(where: { $0.hasPrefix("model name") }),
           let colon = line.firstIndex(of: ":") {
            name = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return HostInfo(cpuName: name, cores: usableCores, memoryBytes: ProcessInfo.processInfo.physicalMemory)
    }

    /// The logical cores this process may run on: its affinity mask (`taskset`, a container's cpuset,
    /// `mpirun --bind-to`), read once from /proc/self/status, or every online core where the mask is
    /// unreadable. The CPU backend's default thread count: more threads than allowed cores only take
    /// turns on them (with 2 threads on 1 core each fork-join waits for the other to be scheduled).
    public static let usableCores: Int = {
        let online = ProcessInfo.processInfo.activeProcessorCount
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Cpus_allowed_list:") }),
              let allowed = countCPUList(String(line.dropFirst("Cpus_allowed_list:".count))) else { return online }
        return max(1, min(online, allowed))
    }()

    /// The environment variable that sets the CPU backend's default thread count.
    public static let threadsVariable = "UPDRAFT_CPU_THREADS"

    /// The CPU backend's default thread count: `UPDRAFT_CPU_THREADS` when it is a count from 1 to 1024,
    /// else `usable` (with a warning when the variable is set to something else).
    public static func cpuThreads(environment: [String: String], usable: Int) -> (threads: Int, warning: String?) {
        guard let text = environment[threadsVariable], !text.isEmpty else { return (usable, nil) }
        guard let n = Int(text.trimmingCharacters(in: .whitespaces)), (1...1024).contains(n) else {
            return (usable, "\(threadsVariable)=\(text) is not a thread count (1 to 1024); using \(usable), the cores this process may use")
        }
        return (n, nil)
    }

    /// `cpuThreads` for this process (read once; a bad value is warned about once on stderr).
    public static var defaultCPUThreads: Int { UpdraftEnvironment.process.cpuThreads }

    /// The number of CPUs in a Linux CPU list ("0-3,8,10-11" is 7), nil when it is not one.
    public static func countCPUList(_ text: String) -> Int? {
        var count = 0
        for part in text.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: ",", omittingEmptySubsequences: false) {
            let bounds = part.split(separator: "-", omittingEmptySubsequences: false)
            guard let lo = Int(bounds[0]), lo >= 0, bounds.count <= 2 else { return nil }
            let hi = bounds.count == 2 ? Int(bounds[1]) : lo
            guard let hi, hi >= lo else { return nil }
            count += hi - lo + 1
        }
        return count > 0 ? count : nil
    }
}

/// "1.5 GiB"-style sizes.
public func formatBytes(_ bytes: UInt64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"]
    var v = Double(bytes), i = 0
    while v >= 1024, i < units.count - 1 { v /= 1024; i += 1 }
    return i == 0 ? "\(bytes) B" : String(format: v < 10 ? "%.1f %@" : "%.0f %@", v, units[i])
}

/// Renders rows as an aligned text table (first row is the header).
public func formatTable(_ rows: [[String]], rightAligned: Set<Int> = []) -> String {
    guard let header = rows.first else { return "" }
    var widths = [Int](repeating: 0, count: header.count)
    for r in rows { for (i, c) in r.enumerated() where i < widths.count { widths[i] = max(widths[i], c.count) } }
    var out = ""
    for (ri, r) in rows.enumerated() {
        let cells = r.enumerated().map { i, c -> String in
            let pad = String(repeating: " ", count: max(0, widths[i] - c.count))
            return rightAligned.contains(i) ? pad + c : c + pad
        }
        out += cells.joined(separator: "  ").trimmingCharacters(in: .whitespaces) + "\n"
        if ri == 0 { out += widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ") + "\n" }
    }
    return out
}
