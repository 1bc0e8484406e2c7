import Foundation
import UpdraftCore
import UpdraftBackends
import UpdraftModel
import UpdraftPlacement
import UpdraftData

/// Where a k-NN's batched distance products run (`NeighborSearch.attach`); the rest of the search
/// (the bound filter, the exact re-check, the votes) is on the host. The rule, simpler than a
/// network's plan because there is one product per batch: a device pinned by `--device` /
/// `preferredDevice` / `UPDRAFT_DEVICE` is used (the host when it pins the CPU; a device the compute
/// units rule out is refused by name, as for a network); otherwise the first OpenCL GPU the compute
/// units allow, unless the job's products are too small to pay for opening it; otherwise the host
/// (OpenBLAS), which also takes every CPU-type OpenCL device's place (PoCL runs the same product
/// slower than OpenBLAS).
enum NearestNeighborsDevice {
    /// Below this many multiply-adds for the whole job (queries x samples x dimension), the host's
    /// OpenBLAS finishes before a GPU's driver, context and programs are ready: about 0.1 s on one core.
    static let smallestDeviceJob = 1e9

    /// The backend to attach, or nil for the host. A GPU that cannot be opened is warned about and
    /// the host used; a pin that names no device, or one the compute units rule out, is an error.
    /// - Parameter work: the job's multiply-adds, when known (queries times samples times dimension).
    static func choose(_ configuration: UpdateConfiguration, environment: [String: String], work: Double? = nil,
                       warn: (String) -> Void) throws -> Backend? {
        let request = DevicePin.request(option: configuration.placement.deviceOption, pin: configuration.placement.preferredDevice, environment: environment)
        guard configuration.placement.computeUnits.usesOpenCL || request != nil else { return nil }
        if request == nil, let work, work < smallestDeviceJob { return nil }
        let inventory = DeviceInventory.discover()
        let chosen: OpenCLDevice
        if let pin = try inventory.resolvePin(request) {
            guard case let .openCL(index) = pin, let device = inventory.openCL.first(where: { $0.info.index == index }) else { return nil }
            try configuration.placement.computeUnits.checkPinned(device.info)
            chosen = device
        } else {
            guard let gpu = inventory.openCL.first(where: { $0.info.type == .gpu && configuration.placement.computeUnits.allows(openCLType: $0.info.type) })
            else { return nil }
            chosen = gpu
        }
        do {
            return try OpenCLBackend(device: chosen)
        } catch {
            warn("cannot use \(chosen.info.name) for the k-NN search: \(firstLine(of: error)); searching on the CPU")
            return nil
        }
    }

    /// The multiply-adds of searching `queries` examples among a k-NN's samples, or nil when the
    /// number of queries is not known.
    static func work(_ knn: KNearestNeighborsSpec, queries: Int?) -> Double? {
        queries.map { Double($0) * Double(knn.samples.count) * Double(knn.dimension) }
    }
}
