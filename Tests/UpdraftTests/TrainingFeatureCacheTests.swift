import XCTest
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftLayers
@testable import UpdraftData
@testable import UpdraftTraining

/// The frozen-prefix feature cache: device memory first (on the backend that runs the tail), host
/// memory past the device budget, recomputation past both, and the same training in every case.
/// conv1, pool1 and the squeeze are frozen in the SqueezeNet-shaped model: the squeeze's ReLU output
/// is the cached boundary.
final class TrainingFeatureCacheTests: SqueezeShapedRunTestCase {
    /// Bytes of one example's boundary rows.
    func rowBytes() throws -> Int {
        let training = try TrainingGraph(graph: try NetworkGraph(model: try model.get()))
        return try training.boundary.reduce(0) { sum, blob in
            sum + 4 * (try XCTUnwrap(training.graph.blobShapes[blob])).itemCount
        }
    }

    func statistics(_ run: TrainingRun, file: StaticString = #filePath, line: UInt = #line) throws -> FeatureCacheStatistics {
        try XCTUnwrap(run.task.featureCacheStatistics, "the cache is on", file: file, line: line)
    }

    func testDeviceTierHoldsEveryExampleAndChangesNothing() throws {
        let cached = try run { $0.placement.backends = (CPUBackend(), CPUBackend()) }
        let uncached = try run { $0.placement.backends = (CPUBackend(), CPUBackend()); $0.featureCache.enabled = false }
        assertSameTraining(cached, uncached, tolerance: 0, "CPU backend, device tier")
        let s = try statistics(cached)
        XCTAssertEqual(s.deviceName, "cpu")
        XCTAssertEqual(s.deviceEntries, 12)
        XCTAssertEqual(s.hostEntries, 0, "the CPU backend's device tier is host memory: nothing beyond it")
        XCTAssertEqual(s.misses, 12, "the prefix ran once per example, in the first epoch")
        XCTAssertEqual(s.hits, 12, "the second epoch found every example")
        XCTAssertEqual(s.deviceBytes, 12 * (try rowBytes()), "one arena sized for the examples expected")
        XCTAssertNil(uncached.task.featureCacheStatistics)
    }

    func testOpenCLDeviceTierChangesNothing() throws {
        let device = try OpenCLTestSupport.context().device
        let openCL = try OpenCLBackend(device: device)
        let cached = try run { $0.placement.backends = (openCL, openCL); $0.placement.fallbacks = [] }
        let uncached = try run { $0.placement.backends = (openCL, openCL); $0.placement.fallbacks = []; $0.featureCache.enabled = false }
        assertSameTraining(cached, uncached, tolerance: 0, "OpenCL, device tier")
        let s = try statistics(cached)
        XCTAssertEqual(s.deviceName, openCL.name)
        XCTAssertEqual(s.deviceEntries, 12)
        XCTAssertEqual(s.hits, 12)
    }

    /// A device budget of five rows: five examples in device memory, the other seven in host memory.
    /// Then no device tier and a host budget of three rows: nine examples run the prefix every epoch.
    func testSmallBudgetsSpillToTheHostAndThenRecompute() throws {
        let row = try rowBytes()
        let uncached = try run { $0.placement.backends = (CPUBackend(), CPUBackend()); $0.featureCache.enabled = false }
        let spilled = try run { $0.placement.backends = (CPUBackend(), CPUBackend()); $0.featureCache.deviceBudgetBytes = 5 * row }
        assertSameTraining(spilled, uncached, tolerance: 0, "device and host tiers")
        var s = try statistics(spilled)
        XCTAssertEqual(s.deviceEntries, 5)
        XCTAssertEqual(s.hostEntries, 7)
        XCTAssertEqual(s.hits, 12)

        let recomputed = try run {
            $0.placement.backends = (CPUBackend(), CPUBackend())
            $0.featureCache.deviceBudgetBytes = 0
            $0.featureCache.budgetBytes = 3 * row + row / 2
        }
        assertSameTraining(recomputed, uncached, tolerance: 0, "host tier past its budget")
        s = try statistics(recomputed)
        XCTAssertNil(s.deviceName, "a device budget of 0: no device tier")
        XCTAssertEqual(s.hostEntries, 3)
        XCTAssertEqual(s.hostBytes, 3 * row)
        XCTAssertEqual(s.hits, 3)
        XCTAssertEqual(s.misses, 12 + 9)
    }

    /// With room for only some examples, each mini-batch misses a different number of them: the prefix
    /// runs on each such count, and the executor still holds a bounded set of workspaces.
    func testMissCountsThatChangeDoNotGrowTheWorkspaces() throws {
        let row = try rowBytes()
        let data = try SqueezeShaped.data(count: 24)
        var config = UpdateConfiguration()
        config.placement.backends = (CPUBackend(), CPUBackend())
        config.featureCache.deviceBudgetBytes = 0
        config.featureCache.budgetBytes = 7 * row
        let task = UpdateTask(model: try model.get(), trainingData: data, configuration: config)
        XCTAssertEqual(task.run().task.state, .completed)
        let s = try XCTUnwrap(task.featureCacheStatistics)
        XCTAssertEqual(s.hostEntries, 7)
        XCTAssertEqual(s.misses, 24 + 17, "the 17 examples that do not fit run the prefix again in epoch 2")
        let sizes = try XCTUnwrap(task.ended?.devices.workspaceBatchSizes)
        XCTAssertLessThanOrEqual(sizes.count, 2, "the batch's workspace and one spare, not one per miss count: \(sizes)")
    }

    /// Validation examples are cached once too (their own keys), and the validation metrics agree.
    func testValidationFeaturesAreCached() throws {
        let validation = try SqueezeShaped.data(count: 5, seed: 99)
        let cached = try run { $0.placement.backends = (CPUBackend(), CPUBackend()); $0.data.validationData = validation }
        let uncached = try run { $0.placement.backends = (CPUBackend(), CPUBackend()); $0.data.validationData = validation; $0.featureCache.enabled = false }
        assertSameTraining(cached, uncached, tolerance: 0, "with validation")
        XCTAssertEqual(cached.epochs.map(\.validationLoss), uncached.epochs.map(\.validationLoss))
        XCTAssertEqual(cached.epochs.map(\.validationAccuracy), uncached.epochs.map(\.validationAccuracy))
        let s = try statistics(cached)
        XCTAssertEqual(s.deviceEntries, 12 + 5)
        XCTAssertEqual(s.misses, 12 + 5)
        XCTAssertEqual(s.hits, 12 + 5, "epoch 2 found every training and validation example")
    }

    /// Data-parallel replicas each need every example: the host tier serves them all.
    func testDataParallelReplicasShareTheHostTier() throws {
        let cached = try run { $0.placement.dataParallel = DataParallelism(replicas: [CPUBackend(), CPUBackend()]) }
        let uncached = try run { $0.placement.dataParallel = DataParallelism(replicas: [CPUBackend(), CPUBackend()]); $0.featureCache.enabled = false }
        assertSameTraining(cached, uncached, tolerance: 0, "data parallel")
        let s = try statistics(cached)
        XCTAssertNil(s.deviceName)
        XCTAssertEqual(s.deviceEntries, 0)
        XCTAssertEqual(s.hostEntries, 12)
        XCTAssertEqual(s.hits, 12)
    }

    /// A device that fails in epoch 2: its device tier goes with it, and the fallback recomputes the
    /// examples it needs (once) into a tier of its own. Training ends as an uninterrupted CPU run does.
    func testFallbackDropsTheFailedDevicesTier() throws {
        // The tail's loss runs once per step: call 5 is epoch 2's second mini-batch.
        let failing = FailingBackend(CPUBackend(), failing: .softmaxCrossEntropy, onCall: 5, deadAfterFailure: true,
                                     name: "gpu")
        let recovered = try run { $0.placement.backends = (failing, failing); $0.placement.fallbacks = [CPUBackend()] }
        let expected = try run { $0.placement.backends = (CPUBackend(), CPUBackend()) }
        assertSameTraining(recovered, expected, tolerance: 0, "resumed on the CPU")
        XCTAssertEqual(recovered.warnings.count, 1, "\(recovered.warnings)")
        let s = try statistics(recovered)
        XCTAssertEqual(s.deviceName, "cpu")
        XCTAssertEqual(s.dropped, 12, "the failed device's entries")
        XCTAssertEqual(s.deviceEntries, 8, "the two mini-batches the CPU ran, recomputed once")
    }

    /// Rows that the device cannot take (an arena out of memory on first use): one warning, the
    /// features go to host memory, training stays on the device and learns the same.
    func testADeviceTierThatFailsMovesTheCacheToTheHost() throws {
        let failing = FailingBackend(CPUBackend(), failing: .copyRows, onCall: 1,
                                     error: OpenCLError(-4, "clEnqueueNDRangeKernel", "copying rows"), name: "gpu")
        let cached = try run { $0.placement.backends = (failing, failing); $0.placement.fallbacks = [] }
        let uncached = try run { $0.placement.backends = (CPUBackend(), CPUBackend()); $0.featureCache.enabled = false }
        assertSameTraining(cached, uncached, tolerance: 0, "host tier after the device tier failed")
        XCTAssertEqual(cached.warnings.count, 1, "\(cached.warnings)")
        XCTAssertTrue(cached.warnings.first?.hasPrefix("the feature cache cannot keep more features on gpu (") ?? false,
                      "\(cached.warnings)")
        XCTAssertTrue(cached.warnings.first?.contains("CL_MEM_OBJECT_ALLOCATION_FAILURE") ?? false, "\(cached.warnings)")
        XCTAssertEqual(cached.epochs.map(\.device), ["gpu", "gpu"], "training stays on the device")
        let s = try statistics(cached)
        XCTAssertNil(s.deviceName, "no second device tier on a backend whose tier failed")
        XCTAssertEqual(s.hostEntries, 12)
        XCTAssertEqual(s.hits, 12)
    }

    // MARK: The cache itself

    /// A device that cannot allocate an arena as large as asked: the tier halves its request until
    /// one fits, keeps going in arenas of that size, and gathers rows back from all of them.
    func testArenasShrinkWhenAllocationsFail() throws {
        let device = FailingBackend(CPUBackend(), name: "gpu")
        device.memoryOverride = .device(bytes: 1 << 30, largestBuffer: 1 << 30)
        let a = try device.makeBuffer((0..<21).map(Float.init)), b = try device.makeBuffer((0..<42).map { Float(100 + $0) })
        let outA = try device.makeBuffer(count: 21), outB = try device.makeBuffer(count: 42)
        device.allocationLimit = 2 * 3 * 2  // two rows of the longer blob
        let cache = FeatureCache(blobs: ["a", "b"], rowLengths: [3, 6], hostBudgetBytes: 0, deviceBudgetBytes: nil,
                                 expectedEntries: 10)
        cache.bind(to: device)
        let keys = (0..<7).map { FeatureCache.Key(set: .training, index: $0, variant: 0) }
        try cache.store(keys, computed: [a, b], on: device)
        let tier = try XCTUnwrap(cache.tier)
        XCTAssertEqual(tier.slotsPerArena, 10, "asked for the rows expected")
        XCTAssertEqual(tier.arenas.map(\.count), [2, 2, 2, 2], "10 and 5 rows failed, 2 fit")
        XCTAssertEqual(cache.statistics.deviceEntries, 7)
        XCTAssertEqual(cache.statistics.deviceBytes, 8 * 9 * 4)
        var slots: [Int] = []
        for key in keys.reversed() {
            guard case let .device(_, slot)? = cache.locate(key) else { return XCTFail("\(key) is on the device") }
            slots.append(slot)
        }
        try tier.gather(slots: slots, positions: Array(0..<7), into: [outA, outB])
        XCTAssertEqual(try device.download(outA), (0..<7).reversed().flatMap { r in (0..<3).map { Float(r * 3 + $0) } })
        XCTAssertEqual(try device.download(outB), (0..<7).reversed().flatMap { r in (0..<6).map { Float(100 + r * 6 + $0) } })
    }

    func testBindingAnotherBackendDropsTheDeviceTier() throws {
        let a = CPUBackend(), b = CPUBackend()
        let cache = FeatureCache(blobs: ["x"], rowLengths: [3], hostBudgetBytes: 1 << 20, deviceBudgetBytes: nil, expectedEntries: 4)
        cache.bind(to: a)
        let rows = try a.makeBuffer([1, 2, 3, 4, 5, 6])
        let k0 = FeatureCache.Key(set: .training, index: 0, variant: 0), k1 = FeatureCache.Key(set: .training, index: 1, variant: 1)
        try cache.store([k0, k1, k0], computed: [try a.makeBuffer([1, 2, 3, 4, 5, 6, 7, 8, 9])], on: a)
        guard case let .device(tier, slot)? = cache.locate(k1) else { return XCTFail("k1 is in the device tier") }
        let out = try a.makeBuffer(count: 6)
        try tier.gather(slots: [slot], positions: [1], into: [out])
        XCTAssertEqual(try a.download(out), [0, 0, 0, 4, 5, 6])
        XCTAssertNil(cache.locate(FeatureCache.Key(set: .validation, index: 0, variant: 0)))
        cache.bind(to: a)
        XCTAssertEqual(cache.statistics.deviceEntries, 2, "binding the same backend keeps the tier")
        cache.bind(to: b)
        XCTAssertNil(cache.locate(k0), "entries on another backend are gone")
        XCTAssertEqual(cache.statistics.dropped, 2)
        // Rows computed on a backend that is not the tier's go to the host tier.
        try cache.store([k0], computed: [rows], on: a)
        guard case let .host(values)? = cache.locate(k0) else { return XCTFail("k0 is in the host tier") }
        XCTAssertEqual(values, [[1, 2, 3]])
        cache.bind(to: nil)
        XCTAssertNil(cache.statistics.deviceName)
        XCTAssertEqual(cache.statistics.hostEntries, 1, "the host tier stays")
    }
}

/// The fp16 option: half the bytes per cached example, and training within half precision's rounding
/// of the fp32 cache; a cached example's features are the rounded ones in every epoch, the first included.
final class TrainingFeatureCacheHalfTests: SqueezeShapedRunTestCase {
    func testHalfPrecisionHalvesTheBytesAndStaysCloseToFloat() throws {
        let openCL = OpenCLBackend(context: try OpenCLTestSupport.context())
        for backends in [(CPUBackend(), CPUBackend()) as (Backend, Backend), (openCL, openCL)] {
            let full = try run { $0.placement.backends = backends; $0.placement.fallbacks = [] }
            let half = try run { $0.placement.backends = backends; $0.placement.fallbacks = []; $0.featureCache.halfPrecision = true }
            let f = try XCTUnwrap(full.task.featureCacheStatistics), h = try XCTUnwrap(half.task.featureCacheStatistics)
            XCTAssertTrue(h.halfPrecision)
            XCTAssertFalse(f.halfPrecision)
            XCTAssertEqual(h.deviceEntries, f.deviceEntries)
            XCTAssertEqual(2 * h.deviceBytes, f.deviceBytes, backends.1.name)
            XCTAssertEqual(h.hits, f.hits)
            let perEpoch = full.losses.count / 2
            XCTAssertGreaterThan(zip(half.losses.prefix(perEpoch), full.losses.prefix(perEpoch)).map { abs($0 - $1) }.max() ?? 0, 0,
                                 "the first epoch reads rounded features too")
            assertSameTraining(half, full, tolerance: 1e-2, "fp16 cache vs fp32 on \(backends.1.name)")
        }
    }

    /// The first epoch's arithmetic is the later epochs': with the weights held still (a learning
    /// rate of 1e-30, whose steps are below every weight's rounding; 0 is not allowed) and the data in order, every epoch's losses are the same bit for bit — also where
    /// the first epoch's last mini-batch wraps round to examples its first one cached (14 examples in
    /// batches of 4; this was a 1.9e-6 mismatch on PoCL), on the CPU and OpenCL, device and host tiers.
    /// Against the fp32 cache the first epoch then stays within half precision's rounding (the bound
    /// tested: 1e-3 of the loss).
    func testEveryEpochReadsTheSameRoundedFeatures() throws {
        let openCL = OpenCLBackend(context: try OpenCLTestSupport.context())
        for backends in [(CPUBackend(), CPUBackend()) as (Backend, Backend), (openCL, openCL)] {
            for deviceBudget in [nil, 0] as [Int?] {
                func go(half: Bool) throws -> TrainingRun {
                    try TrainingRun.train(try SqueezeShaped.model(batch: 4), try SqueezeShaped.data(count: 14)) {
                        $0.placement.backends = backends; $0.placement.fallbacks = []
                        $0.featureCache.halfPrecision = half
                        $0.featureCache.deviceBudgetBytes = deviceBudget
                        $0.parameters = [.learningRate: .double(1e-30), .shuffle: .bool(false)]
                    }
                }
                let half = try go(half: true), full = try go(half: false)
                let name = "\(backends.1.name), device budget \(deviceBudget.map(String.init) ?? "default")"
                XCTAssertEqual(half.losses.count, 8, "\(name): \(half.error.map { "\($0)" } ?? "")")
                XCTAssertEqual(Array(half.losses.prefix(4)), Array(half.losses.suffix(4)), "\(name): epoch 1 against epoch 2")
                XCTAssertEqual(Array(full.losses.prefix(4)), Array(full.losses.suffix(4)), "\(name): fp32")
                for (h, f) in zip(half.losses, full.losses) { XCTAssertEqual(h, f, accuracy: 1e-3 * max(1, abs(f)), name) }
                XCTAssertNotEqual(half.losses, full.losses, "\(name): the features are rounded")
            }
        }
    }

    /// The host tier in half precision, past a device budget of zero.
    func testHalfPrecisionHostTier() throws {
        let full = try run { $0.placement.backends = (CPUBackend(), CPUBackend()); $0.featureCache.deviceBudgetBytes = 0 }
        let half = try run {
            $0.placement.backends = (CPUBackend(), CPUBackend()); $0.featureCache.deviceBudgetBytes = 0; $0.featureCache.halfPrecision = true
        }
        let f = try XCTUnwrap(full.task.featureCacheStatistics), h = try XCTUnwrap(half.task.featureCacheStatistics)
        XCTAssertEqual(h.hostEntries, 12)
        XCTAssertEqual(2 * h.hostBytes, f.hostBytes)
        assertSameTraining(half, full, tolerance: 1e-2, "fp16 host tier")
    }
}
