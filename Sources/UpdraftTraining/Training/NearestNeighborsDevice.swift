import Foundation
import UpdraftCore
import UpdraftBackends
import UpdraftPlacement

/// Where a k-NN's batched distance products run (`NeighborSearch.attach`); the rest of the search
/// (the bound filter, the exact re-check, the votes) is on the host. The rule, simpler than a
/// network's plan because there is one product per batch: a device pinned by `--device` /
/// `preferredDevice` / `UPDRAFT_DEVICE` is used (the host when it pins the CPU); otherwise the first
/// OpenCL GPU the compute units allow; otherwise the host (OpenBLAS), which also takes every CPU-type
/// OpenCL device's place (PoCL runs the same product slower than OpenBLAS).
enum NearestNeighborsDevice {
    /// The backend to attach, or nil for the host. A GPU that cannot be opened is warned about and
    /// the host used; a pin that names no device is an error (as for a network).
    static func choose(_ configuration: UpdateConfiguration, environment: [String: String],
                       warn: (String) -> Void) throws -> Backend? {
        guard configuration.computeUnits.usesOpenCL else { return nil }
        let inventory = DeviceInventory.discover()
        let request = DevicePin.request(option: configuration.deviceOption ?? configuration.preferredDevice?.optionText, environment: environment)
        let chosen: OpenCLDevice
        if let pin = try inventory.resolvePin(request) {
            guard case let .openCL(index) = pin, let device = inventory.openCL.first(where: { $0.info.index == index }) else { return nil }
            chosen = device
        } else {
            guard let gpu = inventory.openCL.first(where: { $0.info.type == .gpu }) else { return nil }
            chosen = gpu
        }
        do {
            return try OpenCLBackend(device: chosen)
        } catch {
            warn("cannot use \(chosen.info.name) for the k-NN search: \(firstLine(of: error)); searching on the CPU")
            return nil
        }
    }
}
