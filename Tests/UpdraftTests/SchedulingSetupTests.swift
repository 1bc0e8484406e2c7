import Foundation
import XCTest
import Updraft
@testable import UpdraftPlacement
@testable import UpdraftTraining

/// The scheduler with a job: a device's set-up (context, program builds or loads) weighed against
/// every batch, so a job of a few examples stays on the CPU and a long one still goes to the GPU.
final class SchedulingSetupTests: XCTestCase {
    typealias D = DescribedDevices

    /// The fast GPU with a driver that takes 0.2 s per program built from source and 5 ms from the binary cache.
    static let gpu: DeviceProfile = {
        var p = D.fastGPU
        p.contextSeconds = 0.1
        p.programBuildSeconds = 0.2
        p.programLoadSeconds = 0.005
        return p
    }()

    private func plan(_ graph: NetworkGraph, batch: Int, job: Scheduler.Job?, cached: Int = 0) throws -> ExecutionPlan {
        var options = Scheduler.Options()
        options.job = job
        options.cachedPrograms = [Self.gpu.identifier: cached]
        return try Scheduler.plan(graph: graph, batchSize: batch, computeUnits: .all, devices: [D.cpu, Self.gpu], options: options)
    }

    func testWithoutAJobTheGPUWinsPerBatch() throws {
        let p = try plan(SchedulingGraphs.squeezeNet(), batch: 16, job: nil)
        XCTAssertEqual(p.tailDevice, Self.gpu)
        XCTAssertNil(p.jobMs)
        // The set-up is still shown: the GPU builds every program once.
        let setup = try XCTUnwrap(p.setup?.first)
        XCTAssertGreaterThan(setup.programs, 5)
        XCTAssertEqual(setup.cachedPrograms, 0)
        XCTAssertEqual(setup.ms, (0.1 + Double(setup.programs) * 0.2) * 1e3, accuracy: 1e-6)
    }

    func testAJobOfAFewExamplesStaysOnTheCPU() throws {
        let graph = try SchedulingGraphs.squeezeNet()
        let p = try plan(graph, batch: 16, job: Scheduler.Job(examples: 20))
        XCTAssertTrue(p.tailDevice.isHost && p.prefixDevice.isHost, p.summary)
        XCTAssertEqual(p.setupMs, 0)
        let gpuCandidate = try XCTUnwrap(p.candidates.first { $0.tailDevice == Self.gpu.identifier && !$0.isSplit })
        let cpuCandidate = try XCTUnwrap(p.candidates.first { $0.tailDevice == "cpu" && !$0.isSplit })
        // Per batch the GPU is faster; for the whole job its set-up makes it slower.
        XCTAssertLessThan(gpuCandidate.totalMs, cpuCandidate.totalMs)
        XCTAssertGreaterThan(try XCTUnwrap(gpuCandidate.jobMs), try XCTUnwrap(cpuCandidate.jobMs))
        XCTAssertEqual(try XCTUnwrap(cpuCandidate.jobMs), 2 * cpuCandidate.totalMs, accuracy: 1e-9, "20 examples at 16 a batch: 2 batches")
        XCTAssertTrue(p.text().contains("Whole job (20 examples, 1 pass)"), p.text())
        XCTAssertTrue(p.text().contains("Set-up before the first batch: none (the host CPU)"), p.text())
    }

    func testALongJobPaysForTheSetUp() throws {
        let p = try plan(SchedulingGraphs.squeezeNet(), batch: 16, job: Scheduler.Job(examples: 50_000, passes: 10))
        XCTAssertEqual(p.tailDevice, Self.gpu)
        XCTAssertGreaterThan(p.setupMs, 0)
        XCTAssertTrue(p.text().contains("to build"), p.text())
    }

    func testCachedProgramsTipAMidSizedJobToTheGPU() throws {
        let graph = try SchedulingGraphs.squeezeNet()
        let perBatch = try plan(graph, batch: 16, job: nil)
        let cpuMs = try XCTUnwrap(perBatch.candidates.first { $0.tailDevice == "cpu" && !$0.isSplit }).totalMs
        let gpuMs = try XCTUnwrap(perBatch.candidates.first { $0.tailDevice == Self.gpu.identifier && !$0.isSplit }).totalMs
        let setup = try XCTUnwrap(perBatch.setup?.first)
        let cold = setup.ms, warm = (0.1 + Double(setup.programs) * 0.005) * 1e3
        // A number of batches whose saving lies between the warm and the cold set-up.
        let batches = Int(((cold + warm) / 2 / (cpuMs - gpuMs)).rounded(.up))
        XCTAssertGreaterThan(Double(batches) * (cpuMs - gpuMs), warm)
        XCTAssertLessThan(Double(batches) * (cpuMs - gpuMs), cold)
        let job = Scheduler.Job(examples: batches * 16)
        XCTAssertTrue(try plan(graph, batch: 16, job: job).tailDevice.isHost, "cold programs: the CPU")
        let warmPlan = try plan(graph, batch: 16, job: job, cached: setup.programs)
        XCTAssertEqual(warmPlan.tailDevice, Self.gpu, "every program cached: the GPU")
        XCTAssertEqual(warmPlan.setup?.first?.cachedPrograms, setup.programs)
        XCTAssertEqual(warmPlan.setupMs, warm, accuracy: 1e-6)
    }

    func testTheJobCountsPassesAndTheFeatureCache() throws {
        // A heavy frozen prefix, a small tail: later passes run the tail on cached features only.
        let p = try plan(SchedulingGraphs.convThenDense(), batch: 8, job: Scheduler.Job(examples: 80, passes: 3))
        let chosen = try XCTUnwrap(p.candidates.first)
        let cached = try XCTUnwrap(p.cachedTotalMs)
        XCTAssertEqual(try XCTUnwrap(p.jobMs), p.setupMs + 10 * p.totalMs + 20 * cached, accuracy: 1e-6)
        XCTAssertEqual(chosen.jobMs, p.jobMs)
    }

    func testAJobTooSmallForAnyDeviceOpensNoOpenCL() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-setup-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let environment = ["UPDRAFT_CACHE_DIR": folder.path, "HOME": folder.path]
        let (plan, _) = try Scheduler.place(graph: SchedulingGraphs.dense(), batchSize: 4, computeUnits: .all,
                                            environment: environment, job: Scheduler.Job(examples: 3))
        XCTAssertTrue(plan.tailDevice.isHost)
        XCTAssertTrue(plan.notes.first?.hasPrefix("OpenCL left closed") ?? false, "\(plan.notes)")
        // Nothing was calibrated but the host: no OpenCL device was opened.
        let stored = CalibrationCache(directory: folder).load()
        XCTAssertEqual(stored.keys.filter { $0.hasPrefix("opencl|") }, [])
        XCTAssertEqual(stored.keys.filter { $0.hasPrefix("host|") }.count, 1)
    }

    func testTheStartFloorComesFromTheCheapestCalibratedDevice() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-floor-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let cache = CalibrationCache(directory: folder)
        let graph = try SchedulingGraphs.dense()
        XCTAssertEqual(Scheduler.openCLStartSeconds(graph: graph, batchSize: 4, calibration: cache, programs: nil).seconds,
                       Scheduler.defaultOpenCLStartSeconds)
        try cache.store(Self.gpu, key: "opencl|Fast GPU|1")
        var slower = Self.gpu
        slower.contextSeconds = 1
        try cache.store(slower, key: "opencl|Slow|1")
        let programs = try GraphAnalysis(graph: graph, batch: 4).programCount([.prefix, .tail])
        let withCache = Scheduler.openCLStartSeconds(graph: graph, batchSize: 4, calibration: cache,
                                                     programs: ProgramBinaryCache(directory: folder))
        XCTAssertEqual(withCache.seconds, 0.1 + Double(programs) * 0.005, accuracy: 1e-9)
        let without = Scheduler.openCLStartSeconds(graph: graph, batchSize: 4, calibration: cache, programs: nil)
        XCTAssertEqual(without.seconds, 0.1 + Double(programs) * 0.2, accuracy: 1e-9)
    }

    func testProgramEntriesAreCountedPerDeviceAndDriver() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-entries-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let cache = ProgramBinaryCache(directory: folder)
        var device = ProgramBinaryCacheTests.device
        for i in 0..<3 { try cache.store([1], for: .init(device: device, source: "p\(i)", options: "")) }
        device.driverVersion = "9"
        try cache.store([1], for: .init(device: device, source: "p0", options: ""))
        XCTAssertEqual(cache.entries(forDevice: "Test Device", driverVersion: "1.0"), 3)
        XCTAssertEqual(cache.entries(forDevice: "Test Device", driverVersion: "9"), 1)
        XCTAssertEqual(cache.entries(forDevice: "Other", driverVersion: "1.0"), 0)
    }

    func testAKNearestNeighborsPinTheComputeUnitsRuleOutIsRefusedByName() throws {
        let devices = try OpenCLRuntime.devices()
        guard let device = devices.first(where: { $0.info.type != .gpu }) else { throw XCTSkip("no non-GPU OpenCL device (PoCL) here") }
        var configuration = UpdateConfiguration()
        configuration.placement.computeUnits = .cpuAndGPU
        configuration.placement.deviceOption = "\(device.info.index)"
        XCTAssertThrowsError(try NearestNeighborsDevice.choose(configuration, environment: [:], warn: { _ in })) { error in
            XCTAssertTrue("\(error)".contains("do not allow"), "\(error)")
        }
        configuration.placement.computeUnits = .all
        XCTAssertNotNil(try NearestNeighborsDevice.choose(configuration, environment: [:], warn: { _ in }))
        // A small search opens nothing unless pinned.
        configuration.placement.deviceOption = nil
        XCTAssertNil(try NearestNeighborsDevice.choose(configuration, environment: [:], work: 1e6, warn: { _ in }))
    }
}
