import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftPlacement

/// Device pins, the inventory's choice of devices, and turning plans into backends (with fallback).
final class SchedulingDeviceTests: XCTestCase {
    typealias D = DescribedDevices
    private let openCL: [(index: Int, name: String)] = [(0, "Fast GPU"), (1, "Slow GPU"), (2, "pthread-cpu")]

    // MARK: Pins

    func testPinByCPUIndexAndName() throws {
        XCTAssertEqual(try DevicePin.resolve("cpu", openCLDevices: openCL), .host)
        XCTAssertEqual(try DevicePin.resolve(" CPU ", openCLDevices: openCL), .host)
        XCTAssertEqual(try DevicePin.resolve("host", openCLDevices: []), .host)
        XCTAssertEqual(try DevicePin.resolve("1", openCLDevices: openCL), .openCL(index: 1))
        XCTAssertEqual(try DevicePin.resolve("fast", openCLDevices: openCL), .openCL(index: 0))
        XCTAssertEqual(try DevicePin.resolve("PTHREAD", openCLDevices: openCL), .openCL(index: 2))
        // A full name wins over names that merely contain it.
        XCTAssertEqual(try DevicePin.resolve("gpu x", openCLDevices: [(0, "GPU X"), (1, "GPU X2")]), .openCL(index: 0))
        XCTAssertEqual(try DevicePin.resolve("slow", among: [D.cpu, D.fastGPU, D.slowGPU]), .openCL(index: 1))
        XCTAssertTrue(DevicePin.openCL(index: 1).matches(D.slowGPU))
        XCTAssertFalse(DevicePin.openCL(index: 1).matches(D.fastGPU))
        XCTAssertTrue(DevicePin.host.matches(D.cpu))
    }

    func testUnknownOrAmbiguousPinListsTheDevices() {
        for text in ["7", "nvidia", "-1", ""] {
            XCTAssertThrowsError(try DevicePin.resolve(text, openCLDevices: openCL, source: "UPDRAFT_DEVICE")) { error in
                let message = "\(error)"
                XCTAssertTrue(message.contains("UPDRAFT_DEVICE"), message)
                XCTAssertTrue(message.contains("cpu"), message)
                for d in openCL { XCTAssertTrue(message.contains("\(d.index) (\(d.name))"), message) }
            }
        }
        XCTAssertThrowsError(try DevicePin.resolve("gpu", openCLDevices: openCL)) { error in
            XCTAssertTrue("\(error)".contains("matches 2 devices"), "\(error)")
        }
        XCTAssertThrowsError(try DevicePin.resolve("0", openCLDevices: [], openCLProblem: "no OpenCL platform")) { error in
            XCTAssertTrue("\(error)".contains("no OpenCL platform"), "\(error)")
        }
        XCTAssertThrowsError(try DevicePin.resolve("cpu", among: [D.fastGPU]))
    }

    func testOptionWinsOverTheEnvironment() {
        let env = [DevicePin.environmentVariable: "1"]
        XCTAssertEqual(DevicePin.request(option: nil, environment: env)?.text, "1")
        XCTAssertEqual(DevicePin.request(option: nil, environment: env)?.source, "UPDRAFT_DEVICE")
        XCTAssertEqual(DevicePin.request(option: "cpu", environment: env)?.text, "cpu")
        XCTAssertEqual(DevicePin.request(option: "cpu", environment: env)?.source, "--device")
        XCTAssertNil(DevicePin.request(option: nil, environment: [DevicePin.environmentVariable: " "]))
        XCTAssertNil(DevicePin.request(option: nil, environment: [:]))
    }

    func testPinnedPlanUsesOnlyThePinnedDevice() throws {
        let graph = try SchedulingGraphs.squeezeNet()
        let devices = [D.cpu, D.fastGPU, D.slowGPU]
        let pin = try DevicePin.resolve("slow", among: devices)
        let plan = try Scheduler.plan(graph: graph, batchSize: 64, computeUnits: .all, devices: devices.filter(pin.matches))
        XCTAssertEqual(plan.devices, [D.slowGPU])
    }

    // MARK: The inventory

    func testInventoryWithoutOpenCLPlansForTheCPUAndSaysWhy() throws {
        let cacheDir = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-inv-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cacheDir) }
        let host = HostInfo(cpuName: "Test CPU", cores: 2, memoryBytes: 8 << 30)
        let inventory = DeviceInventory(host: host, openCL: [], openCLProblem: "no OpenCL platform or device found")
        let setup = try inventory.profiles(computeUnits: .all, pin: nil, cache: CalibrationCache(directory: cacheDir),
                                           hostBackend: CPUBackend(threads: 1))
        XCTAssertEqual(setup.profiles.count, 1)
        XCTAssertTrue(setup.profiles[0].isHost)
        XCTAssertEqual(setup.warnings.count, 1)
        XCTAssertTrue(setup.warnings[0].contains("no OpenCL platform") && setup.warnings[0].contains("CPU only"), setup.warnings[0])
        // cpuOnly does not complain about OpenCL: it never asked for it.
        let cpuOnly = try inventory.profiles(computeUnits: .cpuOnly, pin: nil, cache: CalibrationCache(directory: cacheDir),
                                             hostBackend: CPUBackend(threads: 1))
        XCTAssertTrue(cpuOnly.warnings.isEmpty, "\(cpuOnly.warnings)")
        XCTAssertThrowsError(try inventory.resolvePin(("0", "--device"))) { error in
            XCTAssertTrue("\(error)".contains("no OpenCL platform"), "\(error)")
        }
        XCTAssertEqual(try inventory.resolvePin(("cpu", "--device")), .host)
    }

    func testPinnedOpenCLDeviceMustBeAllowedByTheComputeUnits() throws {
        let device = try OpenCLTestSupport.context().device
        let inventory = DeviceInventory(host: .current, openCL: [device], openCLProblem: nil)
        let pin = DevicePin.openCL(index: device.info.index)
        let refused: [ComputeUnits] = device.info.type == .gpu ? [.cpuOnly] : [.cpuOnly, .cpuAndGPU]
        for units in refused {
            XCTAssertThrowsError(try inventory.profiles(computeUnits: units, pin: pin, cache: nil)) { error in
                XCTAssertTrue("\(error)".contains(units.rawValue), "\(error)")
            }
        }
    }

    // MARK: Backends for a plan

    /// A plan over `prefix` and `tail` (layers do not matter to backend resolution).
    private func plan(prefix: DeviceProfile, tail: DeviceProfile) -> ExecutionPlan {
        ExecutionPlan(batchSize: 1, computeUnits: .all, prefixDevice: prefix, tailDevice: tail, layers: [], transfers: [],
                      totalMs: 0, cachedTotalMs: nil, candidates: [], notes: [])
    }

    private final class Counter { var host = 0; var openCL: [String] = [] }

    private func opener(_ counter: Counter, failing: Set<Int> = []) -> BackendOpener {
        BackendOpener(host: { counter.host += 1; return ReferenceBackend() }, openCL: { profile in
            counter.openCL.append(profile.identifier)
            if let i = profile.openCLIndex, failing.contains(i) {
                throw OpenCLError(-33, "clCreateContext", "opening \(profile.name)")  // CL_INVALID_DEVICE
            }
            return ReferenceBackend()  // stands in for an OpenCL backend
        })
    }

    func testOneDeviceIsOpenedOnceForBothParts() throws {
        let counter = Counter()
        let onCPU = try Scheduler.backends(for: plan(prefix: D.cpu, tail: D.cpu), opener: opener(counter))
        XCTAssertTrue(onCPU.prefix === onCPU.tail)
        XCTAssertFalse(onCPU.isSplit)
        XCTAssertEqual(counter.host, 1)
        XCTAssertTrue(onCPU.warnings.isEmpty)

        let onGPU = try Scheduler.backends(for: plan(prefix: D.fastGPU, tail: D.fastGPU), opener: opener(counter))
        XCTAssertTrue(onGPU.prefix === onGPU.tail)
        XCTAssertEqual(counter.openCL, ["opencl:0"])
        XCTAssertEqual(counter.host, 1)
    }

    func testSplitPlanOpensTwoBackends() throws {
        let counter = Counter()
        let r = try Scheduler.backends(for: plan(prefix: D.fastGPU, tail: D.cpu), opener: opener(counter))
        XCTAssertTrue(r.isSplit)
        XCTAssertEqual(counter.openCL, ["opencl:0"])
        XCTAssertEqual(counter.host, 1)
        XCTAssertTrue(r.warnings.isEmpty)
    }

    func testDeviceThatFailsToOpenFallsBackToTheCPUWithOneWarning() throws {
        let counter = Counter()
        let r = try Scheduler.backends(for: plan(prefix: D.slowGPU, tail: D.fastGPU), opener: opener(counter, failing: [1]))
        XCTAssertEqual(r.warnings.count, 1)
        let w = r.warnings[0]
        XCTAssertFalse(w.contains("\n"), w)
        XCTAssertTrue(w.contains("Slow GPU") && w.contains("CL_INVALID_DEVICE") && w.contains("falling back"), w)
        XCTAssertEqual(r.prefix.name, "reference")  // the host backend the opener gave
        XCTAssertTrue(r.isSplit)

        // Both parts on a failing device: one warning, one fallback backend shared by both.
        let both = try Scheduler.backends(for: plan(prefix: D.slowGPU, tail: D.slowGPU), opener: opener(Counter(), failing: [1]))
        XCTAssertEqual(both.warnings.count, 1)
        XCTAssertTrue(both.prefix === both.tail)
    }

    func testSystemOpenerOpensTheRealDevice() throws {
        let device = try OpenCLTestSupport.context().device
        var profile = D.slowGPU
        profile.openCLIndex = device.info.index
        profile.name = device.info.name
        let r = try Scheduler.backends(for: plan(prefix: profile, tail: profile))
        XCTAssertTrue(r.warnings.isEmpty, "\(r.warnings)")
        XCTAssertTrue(r.tail is OpenCLBackend)
        // A device that is not there (renamed, or an index past the end) falls back to the CPU backend.
        profile.name = "No Such Device"
        let gone = try Scheduler.backends(for: plan(prefix: profile, tail: profile))
        XCTAssertEqual(gone.warnings.count, 1)
        XCTAssertTrue(gone.tail is CPUBackend, "\(type(of: gone.tail))")
        XCTAssertTrue(Scheduler.makeHostBackend() is CPUBackend)
    }

    // MARK: The whole path

    func testScheduleOpensWhatThePlanChose() throws {
        let cacheDir = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-sched-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cacheDir) }
        let cache = CalibrationCache(directory: cacheDir)
        let graph = try SchedulingGraphs.dense()
        let cpu = try Scheduler.schedule(graph: graph, batchSize: 2, computeUnits: .cpuOnly, environment: [:], cache: cache)
        XCTAssertEqual(cpu.plan.devices.map(\.identifier), ["cpu"])
        XCTAssertTrue(cpu.backends.tail is CPUBackend)
        XCTAssertTrue(cpu.backends.prefix === cpu.backends.tail)
        XCTAssertTrue(cpu.warnings.isEmpty, "\(cpu.warnings)")
        XCTAssertEqual(cpu.description, "cpu")

        let device = try OpenCLTestSupport.context().device
        let pinned = try Scheduler.schedule(graph: graph, batchSize: 2, computeUnits: .all,
                                            environment: [DevicePin.environmentVariable: "\(device.info.index)"], cache: cache)
        XCTAssertEqual(pinned.plan.devices.map(\.openCLIndex), [device.info.index])
        XCTAssertTrue(pinned.backends.tail is OpenCLBackend)
        XCTAssertTrue(pinned.plan.notes.contains { $0.contains("UPDRAFT_DEVICE") }, "\(pinned.plan.notes)")
    }
}
