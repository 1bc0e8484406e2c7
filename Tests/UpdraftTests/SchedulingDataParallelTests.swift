import XCTest
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftPlacement

/// When the scheduler splits each mini-batch across devices, how it shares the batch, and how the
/// replicas are opened.
final class SchedulingDataParallelTests: XCTestCase {
    typealias D = DescribedDevices

    /// A second fast GPU, identical to the first.
    static let fastGPU2: DeviceProfile = {
        var d = D.fastGPU
        d.openCLIndex = 4
        return d
    }()

    /// SqueezeNet trained from conv1 on: no frozen prefix, so every batch pays the whole network.
    static let wholeSqueezeNet = Result {
        try NetworkGraph(model: SqueezeNet.build(.init(classes: 10, updatableLayers: ["conv1", "conv10", "fullyconnected0"])))
    }

    func testTwoFastGPUsShareABigBatch() throws {
        let graph = try Self.wholeSqueezeNet.get()
        let plan = try Scheduler.plan(graph: graph, batchSize: 64, computeUnits: .all, devices: [D.cpu, D.fastGPU, Self.fastGPU2])
        let dp = try XCTUnwrap(plan.dataParallel, "\(plan.notes)")
        XCTAssertEqual(dp.devices.map(\.identifier), ["opencl:0", "opencl:4"])
        XCTAssertEqual(dp.slices, [32, 32])
        XCTAssertTrue(dp.fits)
        XCTAssertLessThan(dp.totalMs, plan.totalMs * 0.9, "it pays: the slowest half plus the exchange")
        XCTAssertGreaterThan(dp.exchangeMs, 0)
        XCTAssertEqual(plan.devices.map(\.identifier), ["opencl:0", "opencl:4"])
        XCTAssertTrue(plan.summary.hasPrefix("data parallel on #0 Fast GPU (gpu) (32) + #4 Fast GPU (gpu) (32)"), plan.summary)
        XCTAssertTrue(plan.notes.contains { $0.hasPrefix("data parallel on") && !$0.contains("forced") }, "\(plan.notes)")
        // The plan's JSON carries the choice.
        let decoded = try JSONDecoder().decode(ExecutionPlan.self, from: try JSONEncoder().encode(plan))
        XCTAssertEqual(decoded.dataParallel, dp)
    }

    func testTinyWorkloadIsNotSplitUnlessForced() throws {
        let graph = try SchedulingGraphs.dense()
        let auto = try Scheduler.plan(graph: graph, batchSize: 4, computeUnits: .all, devices: [D.cpu, D.fastGPU, Self.fastGPU2])
        XCTAssertNil(auto.dataParallel)
        XCTAssertTrue(auto.notes.contains { $0.hasPrefix("not data parallel:") }, "\(auto.notes)")

        let forced = try Scheduler.plan(graph: graph, batchSize: 4, computeUnits: .all, devices: [D.cpu, D.fastGPU, Self.fastGPU2],
                                        options: .init(dataParallel: .on))
        let dp = try XCTUnwrap(forced.dataParallel)
        XCTAssertEqual(dp.slices.reduce(0, +), 4)
        XCTAssertTrue(forced.notes.contains { $0.contains("(forced)") }, "\(forced.notes)")

        let off = try Scheduler.plan(graph: try Self.wholeSqueezeNet.get(), batchSize: 64, computeUnits: .all,
                                     devices: [D.fastGPU, Self.fastGPU2], options: .init(dataParallel: .off))
        XCTAssertNil(off.dataParallel)
        XCTAssertFalse(off.notes.contains { $0.contains("data parallel") })
    }

    /// The host backend and an OpenCL CPU device (PoCL) run on the same cores: `auto` never pairs
    /// them (nor two OpenCL CPU devices), `on` does (that is how PoCL machines test data parallelism).
    func testDevicesSharingTheHostCoresCountOnceUnlessForced() throws {
        let graph = try Self.wholeSqueezeNet.get()
        let auto = try Scheduler.plan(graph: graph, batchSize: 64, computeUnits: .all, devices: [D.cpu, D.openCLCPU])
        XCTAssertNil(auto.dataParallel, "\(auto.notes)")
        let forced = try Scheduler.plan(graph: graph, batchSize: 64, computeUnits: .all, devices: [D.cpu, D.openCLCPU],
                                        options: .init(dataParallel: .on))
        XCTAssertEqual(forced.dataParallel?.devices.map(\.identifier), ["opencl:2", "cpu"], "fastest first")
        var secondCPU = D.openCLCPU
        secondCPU.openCLIndex = 5
        let twoCPUs = try Scheduler.plan(graph: graph, batchSize: 64, computeUnits: .all, devices: [D.cpu, D.openCLCPU, secondCPU])
        XCTAssertNil(twoCPUs.dataParallel, "\(twoCPUs.notes)")
        // The host stays out under auto, even beside a GPU it could help.
        let withGPU = try Scheduler.plan(graph: graph, batchSize: 64, computeUnits: .all, devices: [D.cpu, D.slowGPU])
        XCTAssertNil(withGPU.dataParallel, "\(withGPU.notes)")
        // Under cpuOnly there is only the host: nothing to split over, and a note says so when asked.
        let cpuOnly = try Scheduler.plan(graph: graph, batchSize: 64, computeUnits: .cpuOnly, devices: [D.cpu, D.openCLCPU],
                                         options: .init(dataParallel: .on))
        XCTAssertNil(cpuOnly.dataParallel)
        XCTAssertTrue(cpuOnly.notes.contains { $0.contains("fewer than two devices") }, "\(cpuOnly.notes)")
    }

    func testSharesFollowTheDevicesSpeed() throws {
        let graph = try Self.wholeSqueezeNet.get()
        let plan = try Scheduler.plan(graph: graph, batchSize: 32, computeUnits: .all, devices: [D.fastGPU, D.slowGPU],
                                      options: .init(dataParallel: .on))
        let dp = try XCTUnwrap(plan.dataParallel)
        XCTAssertEqual(dp.devices.map(\.identifier), ["opencl:0", "opencl:1"])
        XCTAssertEqual(dp.slices.reduce(0, +), 32)
        XCTAssertGreaterThan(dp.slices[0], 4 * max(1, dp.slices[1]), "the fast GPU takes most of the batch: \(dp.slices)")
    }

    func testModeFromOptionOrEnvironment() throws {
        XCTAssertEqual(try DataParallelMode.resolve(option: nil, environment: [:]), .auto)
        XCTAssertEqual(try DataParallelMode.resolve(option: nil, environment: ["UPDRAFT_DATA_PARALLEL": "1"]), .on)
        XCTAssertEqual(try DataParallelMode.resolve(option: "off", environment: ["UPDRAFT_DATA_PARALLEL": "on"]), .off)
        XCTAssertEqual(try DataParallelMode(parsing: "AUTO"), .auto)
        XCTAssertThrowsError(try DataParallelMode.resolve(option: nil, environment: ["UPDRAFT_DATA_PARALLEL": "sometimes"])) {
            XCTAssertTrue("\($0)".contains("UPDRAFT_DATA_PARALLEL=sometimes"), "\($0)")
        }
        XCTAssertThrowsError(try DataParallelMode(parsing: "maybe")) { XCTAssertTrue("\($0)".contains("auto, on or off")) }
    }

    // MARK: Opening the replicas

    private func plan(_ devices: [DeviceProfile], slices: [Int]) -> ExecutionPlan {
        var p = ExecutionPlan(batchSize: slices.reduce(0, +), computeUnits: .all, prefixDevice: devices[0], tailDevice: devices[0],
                              layers: [], transfers: [], totalMs: 0, cachedTotalMs: nil, candidates: [], notes: [])
        p.dataParallel = .init(devices: devices, slices: slices, totalMs: 0, exchangeMs: 0, fits: true)
        return p
    }

    private func opener(failing: Set<Int> = []) -> BackendOpener {
        BackendOpener(host: { CPUBackend() }, openCL: { profile in
            if let i = profile.openCLIndex, failing.contains(i) { throw OpenCLError(-33, "clCreateContext", "opening \(profile.name)") }
            return ReferenceBackend()
        })
    }

    func testReplicasAreOpenedWithTheirShares() throws {
        let r = try Scheduler.backends(for: plan([D.fastGPU, Self.fastGPU2, D.cpu], slices: [12, 12, 8]), opener: opener())
        XCTAssertTrue(r.isDataParallel)
        XCTAssertEqual(r.replicas.map(\.name), ["reference", "reference", "cpu"])
        XCTAssertEqual(r.shares, [12, 12, 8])
        XCTAssertTrue(r.prefix === r.replicas[0] && r.tail === r.replicas[0])
        XCTAssertEqual(r.description, "data parallel: reference (12) + reference (12) + cpu (8)")
        XCTAssertTrue(r.warnings.isEmpty)
    }

    func testReplicaThatCannotOpenIsLeftOut() throws {
        let r = try Scheduler.backends(for: plan([D.fastGPU, Self.fastGPU2, D.cpu], slices: [12, 12, 8]), opener: opener(failing: [4]))
        XCTAssertEqual(r.replicas.map(\.name), ["reference", "cpu"])
        XCTAssertEqual(r.shares, [12, 8])
        XCTAssertEqual(r.warnings.count, 1)
        XCTAssertTrue(r.warnings[0].contains("#4 Fast GPU") && r.warnings[0].contains("CL_INVALID_DEVICE"), r.warnings[0])

        // With one left there is nothing to split: plain training on it.
        let one = try Scheduler.backends(for: plan([D.fastGPU, Self.fastGPU2], slices: [4, 4]), opener: opener(failing: [4]))
        XCTAssertFalse(one.isDataParallel)
        XCTAssertEqual(one.tail.name, "reference")
        XCTAssertEqual(one.description, "reference")
    }
}
