import Foundation
import UpdraftCore
import UpdraftBackends
import UpdraftPlacement
import UpdraftData

/// The device one rank of an mpirun job trains on. Ranks on one host would otherwise all schedule
/// themselves onto the same devices; instead each takes one by its rank on the host (its local rank,
/// `MPIWorld.localRank`):
/// - an explicit choice wins: `--device` / `deviceOption` / `preferredDevice`, else `UPDRAFT_DEVICE`;
///   a comma-separated list maps local ranks to devices (local rank i takes entry i mod count);
/// - else, when the compute units allow OpenCL and data parallelism is not forced on, the device at
///   local rank mod count among the OpenCL devices the compute units allow (the GPUs when there are
///   any), in the order `updraft devices` lists them;
/// - else the scheduler chooses as for one process (the CPU under cpuOnly).
public struct RankDeviceChoice: Equatable, Sendable {
    /// The `--device` value the rank's run is scheduled with; nil: the scheduler chooses.
    public var deviceOption: String?
    /// How it was chosen, for the device map ("local rank 1 of 2 devices", "--device entry 2 of 3").
    public var reason: String

    /// The choice for local rank `localRank`, from the request (`DevicePin.request`), the compute
    /// units, the data-parallel mode and the OpenCL devices (index and type, as `updraft devices` lists them).
    public static func choose(localRank: Int, request: (text: String, source: String)?, computeUnits: ComputeUnits,
                              dataParallel: DataParallelMode, openCL: [(index: Int, type: OpenCLDeviceType)]) throws -> RankDeviceChoice {
        if let request {
            let entries = request.text.split(separator: ",", omittingEmptySubsequences: false)
                .map { $0.trimmingCharacters(in: .whitespaces) }
            guard entries.count > 1 else { return RankDeviceChoice(deviceOption: request.text, reason: request.source) }
            if let empty = entries.firstIndex(where: \.isEmpty) {
                throw UpdraftError(.invalidArgument, "\(request.source) '\(request.text)' has an empty entry (number \(empty + 1))",
                                   hint: "give one device per local rank, separated by commas, e.g. 0,1 (see `updraft devices`)")
            }
            let i = localRank % entries.count
            return RankDeviceChoice(deviceOption: entries[i], reason: "\(request.source) entry \(i + 1) of \(entries.count)")
        }
        if dataParallel == .on {
            return RankDeviceChoice(deviceOption: nil, reason: "scheduler (data parallel on: the rank uses every device it may)")
        }
        guard computeUnits.usesOpenCL else { return RankDeviceChoice(deviceOption: nil, reason: "scheduler (\(computeUnits.rawValue))") }
        let allowed = openCL.filter { computeUnits.allows(openCLType: $0.type) }
        let gpus = allowed.filter { $0.type == .gpu }
        let candidates = gpus.isEmpty ? allowed : gpus
        guard !candidates.isEmpty else { return RankDeviceChoice(deviceOption: nil, reason: "scheduler (no OpenCL device)") }
        let device = candidates[localRank % candidates.count]
        let kind = gpus.isEmpty ? "OpenCL device" : "GPU"
        return RankDeviceChoice(deviceOption: "\(device.index)",
                                reason: "local rank \(localRank) of \(candidates.count) \(kind)\(candidates.count == 1 ? "" : "s")")
    }
}

extension UpdateConfiguration {
    /// Under mpirun (`distributed` set) with no backends given: chooses this rank's device
    /// (`RankDeviceChoice`) and sets `deviceOption` to it. Nil, changing nothing, otherwise.
    /// `ResolvedRun.resolve` calls it; `updraft plan` does too, so it plans what `train` runs.
    public mutating func chooseRankDevice(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> RankDeviceChoice? {
        guard let distributed, placement.backends == nil, placement.dataParallel == nil else { return nil }
        let request = DevicePin.request(option: placement.deviceOption, pin: placement.preferredDevice, environment: environment)
        // A typed pin (`preferredDevice`) is every rank's device as given; text may be a list to map.
        if let request, case .pin = request.value { return RankDeviceChoice(deviceOption: nil, reason: request.source) }
        let mode = try DataParallelMode.resolve(placement.dataParallelMode, environment: environment)
        let listsOpenCL = request == nil && mode != .on && placement.computeUnits.usesOpenCL
        let inventory = DeviceInventory.discover(includeOpenCL: listsOpenCL)
        let choice = try RankDeviceChoice.choose(localRank: distributed.world.localRank, request: request.map { ($0.text, $0.source) },
                                                 computeUnits: placement.computeUnits,
                                                 dataParallel: mode, openCL: inventory.openCL.map { ($0.info.index, $0.info.type) })
        if let option = choice.deviceOption { placement.deviceOption = option }
        return choice
    }
}

extension DistributedTraining {
    /// Every rank's device, gathered (every rank must call it), as lines for rank 0 to print: rank,
    /// host, local rank, device and how it was chosen.
    /// `device` is where the rank runs ("opencl:NAME", or a plan's summary), followed by the OpenCL
    /// index it was given unless it names it.
    public func deviceMap(device: String, choice: RankDeviceChoice) throws -> [String] {
        let w = world
        let index = choice.deviceOption.flatMap { Int($0) }.map { " #\($0)" }.flatMap { device.contains($0) ? nil : $0 } ?? ""
        let rows = try gather([w.host, "\(w.localRank)", device + index, choice.reason].joined(separator: "\t"))
            .map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
        let hostWidth = max(4, rows.map { $0.first?.count ?? 0 }.max() ?? 0)
        let deviceWidth = max(6, rows.map { $0.count > 2 ? $0[2].count : 0 }.max() ?? 0)
        func pad(_ s: String, _ n: Int) -> String { s + String(repeating: " ", count: max(0, n - s.count)) }
        var lines = ["Ranks and devices (\(w.size) ranks):",
                     "rank  " + pad("host", hostWidth) + "  local rank  " + pad("device", deviceWidth) + "  chosen by"]
        for (r, row) in rows.enumerated() where row.count == 4 {
            lines.append(pad(String(format: "%4d", r), 4) + "  " + pad(row[0], hostWidth) + "  " + String(repeating: " ", count: max(0, 10 - row[1].count)) + row[1]
                         + "  " + pad(row[2], deviceWidth) + "  " + row[3])
        }
        return lines
    }
}
