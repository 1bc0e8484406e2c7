import XCTest
import Updraft
@testable import UpdraftTraining

/// Issue 26 items 2 and 3 under `mpirun`: each rank takes its device by its rank on the host (or
/// from a `--device` list), validation is split across the ranks and equals one process's, a rank
/// whose device fails goes on on its CPU (or, with --no-fallback, every rank stops naming it and
/// rank 0 writes the checkpoint), and the NaN guard acts alike on every rank. Faults come from the
/// `UPDRAFT_TEST_FAIL_RANK` hook; PoCL shows two devices with `POCL_DEVICES="pthread pthread"`.
final class TrainingRanksDevicesTests: XCTestCase {
    private static let files = CommandTestFiles("updraft-rank-devices")
    private static var validation: URL { files.file("validation") }
    /// PoCL with two devices: POCL_DEVICES lists drivers, one device each ("pthread" until PoCL 6,
    /// "cpu" since); set by `requireTwoPoCLDevices` to the spelling this PoCL accepts.
    nonisolated(unsafe) private static var twoDevices: [String: String] = [:]

    override class func setUp() {
        // 20 training images (5 batches of 4) and 14 validation images (chunks of 4, 4, 4, 2).
        writeNoisyImageFolder(files.data, perLabel: 10, seed: 16)
        writeNoisyImageFolder(validation, perLabel: 7, seed: 61)
    }

    override class func tearDown() { files.remove() }

    private func trainArguments(_ name: String, epochs: Int = 1, _ extra: [String]) -> [String] {
        ["train", Self.files.model, "--train", Self.files.data.path, "--validation", Self.validation.path,
         "--epochs", "\(epochs)", "--batch-size", "4", "--learning-rate", "0.1",
         "--out", Self.files.file("\(name).mlmodel").path, "--log", Self.files.file("\(name).jsonl").path] + extra
    }

    private func alone(_ name: String, epochs: Int = 1, _ options: [String], environment: [String: String] = [:]) throws -> CommandRun {
        try runUpdraft(trainArguments(name, epochs: epochs, options), cacheDirectory: Self.files.cache, environment: environment)
    }

    private func ranks(_ n: Int, _ name: String, epochs: Int = 1, _ options: [String], environment: [String: String] = [:]) throws -> CommandRun {
        try MPITestSupport.run(ranks: n, trainArguments(name, epochs: epochs, options), cacheDirectory: Self.files.cache, environment: environment)
    }

    private struct Outcome {
        var losses: [Double] = []
        var validation: [(loss: Double, accuracy: Double)] = []
        var weights: [Float] = []
    }

    /// Mini-batch losses and validation figures from the log, and the trained conv and dense parameters.
    private func outcome(_ name: String) throws -> Outcome {
        var o = Outcome()
        for line in try String(contentsOf: Self.files.file("\(name).jsonl"), encoding: .utf8).split(separator: "\n") {
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { continue }
            if object["event"] as? String == "miniBatchEnd", let l = object["loss"] as? Double { o.losses.append(l) }
            if object["event"] as? String == "epochEnd", let l = object["validationLoss"] as? Double,
               let a = object["validationAccuracy"] as? Double { o.validation.append((l, a)) }
        }
        let trained = try CoreMLModel(contentsOf: Self.files.file("\(name).mlmodel"))
        for layer in ["conv", "dense"] { o.weights += try trained.weights(ofLayer: layer).data + (try trained.bias(ofLayer: layer)?.data ?? []) }
        return o
    }

    /// The same trajectory (to float rounding) and the same validation figures within 1e-6.
    private func assertAlike(_ a: Outcome, _ b: Outcome, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(a.losses.count, b.losses.count, file: file, line: line)
        for (x, y) in zip(a.losses, b.losses) {
            XCTAssertLessThanOrEqual(abs(x - y), 1e-6 + 1e-5 * abs(x), "losses \(x) vs \(y)", file: file, line: line)
        }
        XCTAssertEqual(a.validation.count, b.validation.count, file: file, line: line)
        XCTAssertGreaterThan(a.validation.count, 0, "validation ran", file: file, line: line)
        for (x, y) in zip(a.validation, b.validation) {
            XCTAssertLessThanOrEqual(abs(x.loss - y.loss), 1e-6, "validation loss \(x.loss) vs \(y.loss)", file: file, line: line)
            XCTAssertLessThanOrEqual(abs(x.accuracy - y.accuracy), 1e-6, "validation accuracy \(x.accuracy) vs \(y.accuracy)", file: file, line: line)
        }
        XCTAssertEqual(a.weights.count, b.weights.count, file: file, line: line)
        let worst = zip(a.weights, b.weights).map { abs($0 - $1) }.max() ?? .infinity
        XCTAssertLessThanOrEqual(worst, 1e-5, "weights differ by \(worst)", file: file, line: line)
    }

    /// The device map rank 0 printed: per rank, its row's text.
    private func deviceMap(_ stdout: String) -> [Int: String] {
        let lines = stdout.split(separator: "\n").map(String.init)
        guard let start = lines.firstIndex(where: { $0.hasPrefix("Ranks and devices") }) else { return [:] }
        var rows: [Int: String] = [:]
        for line in lines[(start + 2)...] {
            let fields = line.split(separator: " ", maxSplits: 1)
            guard fields.count == 2, let rank = Int(fields[0]) else { break }
            rows[rank] = String(fields[1])
        }
        return rows
    }

    /// PoCL with two devices, or a skip: the device tests need OpenCL and both PoCL devices.
    private func requireTwoPoCLDevices() throws {
        _ = try OpenCLTestSupport.context()
        if !Self.twoDevices.isEmpty { return }
        var seen: [String] = []
        for drivers in ["pthread pthread", "cpu cpu"] {
            let listed = try runUpdraft(["devices"], cacheDirectory: Self.files.cache, environment: ["POCL_DEVICES": drivers])
            // One table row per OpenCL device, each naming its platform.
            if listed.stdout.components(separatedBy: "Portable Computing Language").count - 1 == 2 {
                Self.twoDevices = ["POCL_DEVICES": drivers]
                return
            }
            seen.append("POCL_DEVICES=\"\(drivers)\": \(listed.stdout)")
        }
        throw XCTSkip("PoCL does not show two devices: \(seen.joined(separator: "; "))")
    }

    /// Three ranks on the CPU: validation split (each rank a third of the chunks) and summed equals one
    /// process's; each rank is placed for its share of the mini-batch.
    func testThreeRanksOnTheCPUValidateLikeOneProcess() throws {
        let one = try alone("cpu-1", epochs: 10, ["--compute-units", "cpuOnly"])
        XCTAssertEqual(one.status, 0, one.stderr)
        let three = try ranks(3, "cpu-3", epochs: 10, ["--compute-units", "cpuOnly"])
        XCTAssertEqual(three.status, 0, three.stderr)
        guard one.status == 0, three.status == 0 else { return }
        assertAlike(try outcome("cpu-1"), try outcome("cpu-3"))
        let map = deviceMap(three.stdout)
        XCTAssertEqual(map.keys.sorted(), [0, 1, 2], three.stdout)
        for row in map.values { XCTAssertTrue(row.contains("cpu") && row.contains("scheduler (cpuOnly)"), row) }
        // Each rank is placed for its share of the batch of 4 (2, rounded up), as `updraft plan` places it.
        XCTAssertTrue(three.stdout.contains("on each of 3 ranks (mpirun) (placed for 2 examples each)"), three.stdout)
    }

    /// Three ranks, two PoCL devices: local ranks 0, 1, 2 take devices #0, #1, #0 and train like one
    /// process on #0 (validation within 1e-6); a --device list maps local ranks to its entries.
    func testEachRankTakesTheDeviceOfItsLocalRank() throws {
        try requireTwoPoCLDevices()
        let one = try alone("pocl-1", ["--device", "0"], environment: Self.twoDevices)
        XCTAssertEqual(one.status, 0, one.stderr)
        let three = try ranks(3, "pocl-3", [], environment: Self.twoDevices)
        XCTAssertEqual(three.status, 0, three.stderr)
        guard one.status == 0, three.status == 0 else { return }
        assertAlike(try outcome("pocl-1"), try outcome("pocl-3"))
        let map = deviceMap(three.stdout)
        XCTAssertEqual(map.keys.sorted(), [0, 1, 2], three.stdout)
        for (rank, device) in [(0, 0), (1, 1), (2, 0)] {
            let row = map[rank] ?? ""
            XCTAssertTrue(row.contains("opencl:") && row.contains("#\(device)  local rank \(rank) of 2 OpenCL devices"), row)
        }
        let listed = try ranks(3, "pocl-list", ["--device", "1,0"], environment: Self.twoDevices)
        XCTAssertEqual(listed.status, 0, listed.stderr)
        let rows = deviceMap(listed.stdout)
        for (rank, device, entry) in [(0, 1, 1), (1, 0, 2), (2, 1, 1)] {
            XCTAssertTrue(rows[rank]?.contains("#\(device)  --device entry \(entry) of 2") ?? false, "\(rows)")
        }
    }

    /// Rank 1's device fails in step 3: it warns, takes the step again on its CPU with the others,
    /// and the job trains like one process.
    func testARankWhoseDeviceFailsGoesOnOnItsCPU() throws {
        try requireTwoPoCLDevices()
        let one = try alone("fallback-1", epochs: 10, ["--device", "0"], environment: Self.twoDevices)
        XCTAssertEqual(one.status, 0, one.stderr)
        let two = try ranks(2, "fallback-2", epochs: 10, [], environment: Self.twoDevices.merging([InjectedRankFailure.variable: "1:3"]) { $1 })
        XCTAssertEqual(two.status, 0, two.stderr)
        guard one.status == 0, two.status == 0 else { return }
        XCTAssertTrue(two.stderr.contains("warning: rank 1 of 2: opencl:") && two.stderr.contains("injected device failure")
                      && two.stderr.contains("continuing on cpu from the last completed step, epoch 1 mini-batch 3 again"), two.stderr)
        XCTAssertFalse(two.stderr.contains("rank 0 of 2: opencl:"), "only rank 1's device failed: \(two.stderr)")
        let a = try outcome("fallback-1"), b = try outcome("fallback-2")
        XCTAssertEqual(b.losses.count, 50, "every step once in the log, the failed one included")
        // Rank 1 updates on its CPU, rank 0 on PoCL: their rounding may part them; at each epoch's end
        // they take rank 0's state, said once (by rank 0).
        XCTAssertLessThanOrEqual(two.stderr.components(separatedBy: "differed from rank 0's").count - 1, 1, two.stderr)
        assertAlike(a, b)
    }

    /// With --no-fallback, rank 1's device failing in step 3 stops every rank with an error naming
    /// rank 1 and its device; rank 0 wrote the checkpoint after step 2, and it resumes.
    func testWithoutFallbackEveryRankStopsNamingTheFailedRankAndDevice() throws {
        try requireTwoPoCLDevices()
        let name = "nofallback"
        let run = try ranks(2, name, ["--no-fallback"], environment: Self.twoDevices.merging([InjectedRankFailure.variable: "1:3"]) { $1 })
        XCTAssertNotEqual(run.status, 0)
        for rank in [0, 1] {
            let line = run.stderr.split(separator: "\n").first { $0.hasPrefix("training failed on rank \(rank) of 2:") }
            XCTAssertNotNil(line, "rank \(rank) says why it stopped: \(run.stderr)")
            let text = String(line ?? "")
            XCTAssertTrue(text.contains("failed on rank 1 of 2 (") && text.contains("local rank 1): opencl:")
                          && text.contains("injected device failure") && text.contains("every rank stops"), text)
        }
        XCTAssertFalse(run.stderr.contains("mpirun ended this rank"), "the ranks stop together: \(run.stderr)")
        let out = Self.files.file("\(name).mlmodel")
        let checkpoint = try TrainingCheckpoint.read(forModel: out)
        XCTAssertEqual(checkpoint.position.steps, 2, "the last completed step")
        XCTAssertTrue(run.stderr.contains("rank 0 wrote the checkpoint of epoch 1, after mini-batch 2 (step 2) to \(out.path)"), run.stderr)
        let resumed = try runUpdraft(["train", "--resume", out.path, "--train", Self.files.data.path, "--validation", Self.validation.path,
                                      "--device", "0"], cacheDirectory: Self.files.cache, environment: Self.twoDevices)
        XCTAssertEqual(resumed.status, 0, resumed.stderr)
    }
}

/// The NaN guard under mpirun: a NaN target in one example makes its mini-batch's loss NaN on the
/// rank that holds it; every rank skips that batch (or stops at it) as one process does.
final class TrainingRanksNonFiniteTests: XCTestCase {
    private static let files = CommandTestFiles("updraft-rank-nan")

    override class func setUp() {
        let fm = FileManager.default
        try? fm.createDirectory(at: files.data, withIntermediateDirectories: true)
        // x [3] -> fc [2], mean squared error, SGD in batches of 2: 12 examples, the sixth with a NaN target.
        var builder = try! ModelBuilder.denseRegressor()
        builder.setOptimizer(.sgd(learningRate: 0.05, learningRateRange: DoubleBounds(min: 0, max: 1), miniBatchSize: 2))
        builder.setEpochs(3)
        try! builder.build().write(to: files.file("regressor.mlmodel"))
        var rng = SplitMix64(seed: 26)
        let inputs = (0..<36).map { _ in Float(rng.next() % 2000) / 1000 - 1 }
        let targets = (0..<24).map { i -> Float in i == 10 ? .nan : Float(rng.next() % 2000) / 1000 - 1 }
        _ = fm.createFile(atPath: files.data.appendingPathComponent("inputs.npy").path,
                      contents: NpyArray(shape: [12, 3], descr: "<f4", values: .float(inputs)).serialized())
        _ = fm.createFile(atPath: files.data.appendingPathComponent("targets.npy").path,
                      contents: NpyArray(shape: [12, 2], descr: "<f4", values: .float(targets)).serialized())
    }

    override class func tearDown() { files.remove() }

    private func arguments(_ name: String, _ extra: [String]) -> [String] {
        ["train", Self.files.file("regressor.mlmodel").path, "--train", Self.files.data.path, "--compute-units", "cpuOnly",
         "--out", Self.files.file("\(name).mlmodel").path, "--log", Self.files.file("\(name).jsonl").path] + extra
    }

    private func outcome(_ name: String) throws -> (losses: [Double], weights: [Float]) {
        var losses: [Double] = []
        for line in try String(contentsOf: Self.files.file("\(name).jsonl"), encoding: .utf8).split(separator: "\n") {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            if object?["event"] as? String == "miniBatchEnd", let l = object?["loss"] as? Double { losses.append(l) }
        }
        let model = try CoreMLModel(contentsOf: Self.files.file("\(name).mlmodel"))
        return (losses, try model.weights(ofLayer: "fc").data + (try model.bias(ofLayer: "fc")?.data ?? []))
    }

    private func compare(_ name: String, _ options: [String]) throws -> (one: CommandRun, two: CommandRun) {
        let one = try runUpdraft(arguments("\(name)-1", options), cacheDirectory: Self.files.cache)
        let two = try MPITestSupport.run(ranks: 2, arguments("\(name)-2", options), cacheDirectory: Self.files.cache)
        let a = try outcome("\(name)-1"), b = try outcome("\(name)-2")
        XCTAssertEqual(a.losses.count, b.losses.count)
        for (x, y) in zip(a.losses, b.losses) { XCTAssertEqual(x, y, accuracy: 1e-6 + 1e-5 * abs(x)) }
        XCTAssertTrue(b.weights.allSatisfy(\.isFinite), "\(b.weights)")
        let worst = zip(a.weights, b.weights).map { abs($0 - $1) }.max() ?? .infinity
        XCTAssertLessThanOrEqual(worst, 1e-6, "weights differ by \(worst)")
        return (one, two)
    }

    func testEveryRankSkipsTheNonFiniteBatchAsOneProcessDoes() throws {
        _ = try MPITestSupport.mpirun()
        let (one, two) = try compare("skip", ["--skip-nonfinite"])
        XCTAssertEqual(one.status, 0, one.stderr)
        XCTAssertEqual(two.status, 0, two.stderr)
        // Three epochs of 6 batches, each epoch's batch holding example 5 skipped.
        XCTAssertEqual(try outcome("skip-2").losses.count, 15)
        // Both ranks see the NaN loss (the global one) and skip; rank 1's warning names itself.
        XCTAssertEqual(two.stderr.components(separatedBy: "skipping the mini-batch").count - 1, 6, two.stderr)
        XCTAssertTrue(two.stderr.contains("rank 1 of 2: epoch"), two.stderr)
    }

    func testEveryRankStopsAtTheNonFiniteBatchWithTheLastFiniteWeights() throws {
        _ = try MPITestSupport.mpirun()
        let (one, two) = try compare("stop", [])
        XCTAssertEqual(one.status, 1, one.stderr)
        XCTAssertNotEqual(two.status, 0, two.stderr)
        guard let place = one.stderr.range(of: #"training stopped at epoch \d+ mini-batch \d+"#, options: .regularExpression) else {
            return XCTFail(one.stderr)
        }
        let stop = String(one.stderr[place])
        for rank in [0, 1] {
            XCTAssertTrue(two.stderr.contains("training failed on rank \(rank) of 2: \(stop)"), "rank \(rank): \(two.stderr)")
        }
    }
}

/// The device each rank takes (no MPI needed): local rank against the devices and the request.
final class RankDeviceChoiceTests: XCTestCase {
    private let pocl: [(index: Int, type: OpenCLDeviceType)] = [(0, .cpu), (1, .cpu)]
    private let mixed: [(index: Int, type: OpenCLDeviceType)] = [(0, .cpu), (1, .gpu), (2, .gpu), (3, .gpu)]

    private func choose(_ localRank: Int, _ request: (text: String, source: String)? = nil, units: ComputeUnits = .all,
                        mode: DataParallelMode = .auto, devices: [(index: Int, type: OpenCLDeviceType)]) throws -> RankDeviceChoice {
        try RankDeviceChoice.choose(localRank: localRank, request: request, computeUnits: units, dataParallel: mode, openCL: devices)
    }

    func testLocalRanksTakeDevicesRoundRobinPreferringGPUs() throws {
        XCTAssertEqual(try (0..<5).map { try choose($0, devices: pocl).deviceOption }, ["0", "1", "0", "1", "0"])
        // GPUs when there are any: the PoCL CPU device beside them is left to the host's own backend.
        XCTAssertEqual(try (0..<4).map { try choose($0, devices: mixed).deviceOption }, ["1", "2", "3", "1"])
        XCTAssertEqual(try choose(2, devices: mixed).reason, "local rank 2 of 3 GPUs")
        XCTAssertEqual(try choose(1, units: .cpuAndGPU, devices: mixed).deviceOption, "2")
        XCTAssertNil(try choose(1, units: .cpuAndGPU, devices: pocl).deviceOption, "cpuAndGPU rules the PoCL CPU devices out")
        XCTAssertNil(try choose(1, units: .cpuOnly, devices: mixed).deviceOption)
        XCTAssertNil(try choose(1, mode: .on, devices: mixed).deviceOption, "data parallel on: the rank uses every device")
        XCTAssertNil(try choose(0, devices: []).deviceOption)
    }

    func testAnExplicitDeviceWinsAndAListMapsLocalRanks() throws {
        XCTAssertEqual(try choose(3, ("cpu", "--device"), devices: mixed), RankDeviceChoice(deviceOption: "cpu", reason: "--device"))
        XCTAssertEqual(try choose(1, ("2", "UPDRAFT_DEVICE"), units: .cpuOnly, devices: mixed).deviceOption, "2")
        let list = try (0..<4).map { try choose($0, ("3, cpu ,1", "--device"), devices: mixed) }
        XCTAssertEqual(list.map(\.deviceOption), ["3", "cpu", "1", "3"])
        XCTAssertEqual(list[1].reason, "--device entry 2 of 3")
        XCTAssertThrowsError(try choose(0, ("0,,1", "--device"), devices: mixed)) { e in
            XCTAssertTrue("\(e)".contains("has an empty entry (number 2)"), "\(e)")
        }
        // Without mpirun a list is refused, saying what it is for.
        XCTAssertThrowsError(try DevicePin.resolve("0,1", openCLDevices: [(0, "a"), (1, "b")])) { e in
            XCTAssertTrue("\(e)".contains("is a list: a list gives each rank of an mpirun job"), "\(e)")
        }
    }

    func testTheFaultHookReadsRankAndStep() throws {
        XCTAssertNil(try InjectedRankFailure.requested([:]))
        XCTAssertEqual(try InjectedRankFailure.requested([InjectedRankFailure.variable: "1:3"]), InjectedRankFailure(rank: 1, step: 3))
        for bad in ["1", "a:2", "1:0", "-1:2", "1:2:3"] {
            XCTAssertThrowsError(try InjectedRankFailure.requested([InjectedRankFailure.variable: bad]), bad)
        }
    }
}
