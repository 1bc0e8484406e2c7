import XCTest
@testable import UpdraftModel
@testable import UpdraftPlacement
@testable import UpdraftTraining

/// `mpirun -np 2 updraft train` on localhost against the single-process run: the same losses and
/// weights (to float rounding) on the CPU backend and on OpenCL (PoCL in CI); a killed or hung rank
/// ends the others with a named error, the last checkpoint intact.
final class TrainingRanksTests: XCTestCase {
    private static let files = CommandTestFiles("updraft-ranks")

    override class func setUp() {
        // Ten dark and ten bright noisy images ("no" and "yes"): 20 examples, 5 batches of 4.
        writeNoisyImageFolder(files.data, perLabel: 10, seed: 16)
    }

    override class func tearDown() { files.remove() }

    private func start(_ executable: URL, _ arguments: [String]) throws -> (Process, Pipe, Pipe) {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for key in [DevicePin.environmentVariable, DataParallelMode.environmentVariable] { env.removeValue(forKey: key) }
        env[CalibrationCache.directoryVariable] = Self.files.cache.path
        process.environment = env
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        return (process, out, err)
    }

    private func finish(_ p: (Process, Pipe, Pipe)) -> CommandRun {
        final class Drained: @unchecked Sendable { var data = Data() }
        let stderr = Drained(), drained = DispatchSemaphore(value: 0)
        DispatchQueue.global().async { stderr.data = p.2.fileHandleForReading.readDataToEndOfFile(); drained.signal() }
        let stdout = p.1.fileHandleForReading.readDataToEndOfFile()
        drained.wait()
        p.0.waitUntilExit()
        return CommandRun(status: p.0.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
                          stderr: String(decoding: stderr.data, as: UTF8.self))
    }

    private func trainArguments(_ name: String, epochs: Int = 10, batch: Int = 4, _ extra: [String]) -> [String] {
        ["train", Self.files.model, "--train", Self.files.data.path, "--epochs", "\(epochs)", "--batch-size", "\(batch)",
         "--learning-rate", "0.1", "--out", Self.files.file("\(name).mlmodel").path,
         "--log", Self.files.file("\(name).jsonl").path] + extra
    }

    /// Mini-batch losses from the log and the trained conv and dense parameters.
    private func outcome(_ name: String) throws -> (losses: [Double], weights: [Float]) {
        let log = try String(contentsOf: Self.files.file("\(name).jsonl"), encoding: .utf8)
        var losses: [Double] = []
        for line in log.split(separator: "\n") {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            if object?["event"] as? String == "miniBatchEnd", let l = object?["loss"] as? Double { losses.append(l) }
        }
        let trained = try CoreMLModel(contentsOf: Self.files.file("\(name).mlmodel"))
        var weights: [Float] = []
        for layer in ["conv", "dense"] {
            weights += try trained.weights(ofLayer: layer).data + (try trained.bias(ofLayer: layer)?.data ?? [])
        }
        return (losses, weights)
    }

    /// One process, then two ranks, with the same options: the same trajectory.
    private func compareOneAndTwoRanks(_ name: String, _ options: [String]) throws {
        let mpirun = try MPITestSupport.mpirun()
        let one = finish(try start(try MPITestSupport.updraftBinary(), trainArguments("\(name)-1", options)))
        XCTAssertEqual(one.status, 0, one.stderr)
        let two = finish(try start(mpirun, try MPITestSupport.arguments(ranks: 2, trainArguments("\(name)-2", options))))
        XCTAssertEqual(two.status, 0, two.stderr)
        guard one.status == 0, two.status == 0 else { return }
        // Rank 0 alone prints: one header, one "wrote" line.
        XCTAssertEqual(two.stdout.components(separatedBy: "wrote ").count - 1, 1, two.stdout)
        XCTAssertTrue(two.stdout.contains("on each of 2 ranks (mpirun)"), two.stdout)
        let a = try outcome("\(name)-1"), b = try outcome("\(name)-2")
        XCTAssertEqual(a.losses.count, 50)
        XCTAssertEqual(a.losses.count, b.losses.count)
        for (x, y) in zip(a.losses, b.losses) {
            // A loss near 0 is -log(p) for p near 1: float rounding of p is worth ~1e-7 absolute.
            XCTAssertLessThanOrEqual(abs(x - y), 1e-6 + 1e-5 * abs(x), "losses \(x) vs \(y)")
        }
        XCTAssertEqual(a.weights.count, b.weights.count)
        let worst = zip(a.weights, b.weights).map { abs($0 - $1) }.max() ?? .infinity
        XCTAssertLessThanOrEqual(worst, 1e-5, "weights differ by \(worst)")
        // Training moved the weights: the comparison is not between two copies of the initial model.
        let initial = try CoreMLModel(contentsOf: URL(fileURLWithPath: Self.files.model))
        let before = try initial.weights(ofLayer: "dense").data
        XCTAssertGreaterThan(zip(before, b.weights.suffix(from: b.weights.count - 514)).map { abs($0 - $1) }.max() ?? 0, 1e-3)
    }

    func testTwoRanksTrainLikeOneProcessOnTheCPU() throws {
        try compareOneAndTwoRanks("cpu", ["--compute-units", "cpuOnly"])
    }

    /// `--tensorboard` under mpirun: rank 0 alone writes, one event file with every step's loss once.
    func testOnlyRankZeroWritesTheTensorBoardLog() throws {
        let mpirun = try MPITestSupport.mpirun()
        let dir = Self.files.file("tb-ranks")
        let run = finish(try start(mpirun, try MPITestSupport.arguments(ranks: 2, trainArguments(
            "tb-ranks", epochs: 1, ["--compute-units", "cpuOnly", "--tensorboard", dir.path]))))
        XCTAssertEqual(run.status, 0, run.stderr)
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path)
        XCTAssertEqual(files.count, 1, "\(files)")
        let losses = try outcome("tb-ranks").losses
        let events = try readEventFile(dir.appendingPathComponent(files[0]))
        let logged = events.flatMap { e in e.values.filter { $0.tag == "batch/loss" }.map { (e.step, $0.scalar!) } }
        XCTAssertEqual(logged.map(\.0), (1...Int64(losses.count)).map { $0 })
        XCTAssertEqual(logged.map(\.1), losses.map { Float($0) })
    }

    func testTwoRanksTrainLikeOneProcessOnOpenCL() throws {
        _ = try OpenCLTestSupport.context()
        try compareOneAndTwoRanks("opencl", ["--device", "0"])
    }

    /// Each rank splitting its examples again between its own devices (OpenCL and the CPU): the
    /// local combination and the sum over ranks together still give the single-process trajectory.
    func testTwoRanksWithTwoDevicesEachTrainLikeOneProcess() throws {
        _ = try OpenCLTestSupport.context()
        try compareOneAndTwoRanks("replicas", ["--data-parallel", "on"])
    }

    /// `updraft plan` under mpirun: both ranks' plans for half the batch, and a measured exchange of
    /// the model's gradient bytes (conv 112 + dense 514 parameters, as float32); without mpirun,
    /// --ranks/--link-gbps give the same lines as a projection.
    func testPlanShowsEveryRankAndTheGradientExchange() throws {
        let mpirun = try MPITestSupport.mpirun()
        let planArgs = ["plan", Self.files.model, "--batch-size", "8", "--compute-units", "cpuOnly"]
        let run = finish(try start(mpirun, try MPITestSupport.arguments(ranks: 2, planArgs)))
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("Ranks: 2; global batch 8, up to 4 examples per rank"), run.stdout)
        XCTAssertEqual(run.stdout.components(separatedBy: "Total per batch").count - 1, 1, "rank 0 alone prints: \(run.stdout)")
        XCTAssertTrue(run.stdout.contains("Gradient exchange: 0.003 MB per step, measured"), run.stdout)
        XCTAssertTrue(run.stdout.contains("Estimated step:"), run.stdout)
        // The device each rank plans on (as `train` would give it), with how it was chosen.
        XCTAssertTrue(run.stdout.contains("Ranks and devices (2 ranks):"), run.stdout)
        XCTAssertEqual(run.stdout.components(separatedBy: "scheduler (cpuOnly)").count - 1, 2, run.stdout)
        let projected = finish(try start(try MPITestSupport.updraftBinary(), planArgs + ["--ranks", "4", "--link-gbps", "100"]))
        XCTAssertEqual(projected.status, 0, projected.stderr)
        // 2 * 3/4 * 2504 bytes at 12.5 GB/s = 0.0003 ms.
        XCTAssertTrue(projected.stdout.contains("projected over 100 Gb/s links (not measured): 0.000 ms per step"), projected.stdout)
        XCTAssertTrue(projected.stdout.contains("up to 2 examples per rank"), projected.stdout)
        let bad = finish(try start(try MPITestSupport.updraftBinary(), planArgs + ["--ranks", "4"]))
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertTrue(bad.stderr.contains("--ranks and --link-gbps go together"), bad.stderr)
    }

    /// A 2-rank run killed after its checkpoint at mini-batch 20 resumes with one process, and with two
    /// ranks again, to the single-process run's weights (to float rounding): ranks only split the work.
    func testAKilledTwoRankRunResumesWithOneProcessOrTwoRanks() throws {
        let mpirun = try MPITestSupport.mpirun()
        let options = ["--compute-units", "cpuOnly"]
        let one = finish(try start(try MPITestSupport.updraftBinary(), trainArguments("resume-whole", options)))
        XCTAssertEqual(one.status, 0, one.stderr)
        let checkpoint = Self.files.file("resume-killed.mlmodel")
        let run = try start(mpirun, try MPITestSupport.arguments(ranks: 2, environment: ["UPDRAFT_PAUSE_AFTER_MINI_BATCH": "21"],
            trainArguments("resume-killed", options + ["--checkpoint-every-batches", "10"])))
        let resumeState = TrainingCheckpoint.url(forModel: checkpoint)
        let deadline = Date().addingTimeInterval(120)
        var paused = false
        while !paused, Date() < deadline, run.0.isRunning {
            Thread.sleep(forTimeInterval: 0.1)
            // Rank 0 logs each mini-batch after its checkpoint is due; the 21st line means it paused.
            let log = (try? String(contentsOf: Self.files.file("resume-killed.jsonl"), encoding: .utf8)) ?? ""
            paused = log.components(separatedBy: "\"miniBatchEnd\"").count - 1 >= 21
                && FileManager.default.fileExists(atPath: resumeState.path)
        }
        for pid in MPITestSupport.ranks(of: run.0.processIdentifier).values { kill(pid, SIGKILL) }
        kill(run.0.processIdentifier, SIGKILL)
        _ = finish(run)
        XCTAssertTrue(paused, "both ranks paused after mini-batch 21 with a checkpoint on disk")
        let fm = FileManager.default
        for name in ["resume-1", "resume-2"] {
            for (from, to) in [(checkpoint, Self.files.file("\(name).mlmodel")),
                               (resumeState, TrainingCheckpoint.url(forModel: Self.files.file("\(name).mlmodel")))] {
                try? fm.removeItem(at: to)
                try fm.copyItem(at: from, to: to)
            }
        }
        func resumeArguments(_ name: String) -> [String] {
            ["train", "--resume", Self.files.file("\(name).mlmodel").path, "--train", Self.files.data.path,
             "--log", Self.files.file("\(name).jsonl").path] + options
        }
        let alone = finish(try start(try MPITestSupport.updraftBinary(), resumeArguments("resume-1")))
        XCTAssertEqual(alone.status, 0, alone.stderr)
        let pair = finish(try start(mpirun, try MPITestSupport.arguments(ranks: 2, resumeArguments("resume-2"))))
        XCTAssertEqual(pair.status, 0, pair.stderr)
        guard one.status == 0, alone.status == 0, pair.status == 0 else { return }
        let whole = try outcome("resume-whole")
        for name in ["resume-1", "resume-2"] {
            let resumed = try outcome(name)
            XCTAssertEqual(resumed.losses.count, 30, "\(name) trained the 30 mini-batches after the checkpoint")
            for (x, y) in zip(whole.losses.suffix(30), resumed.losses) {
                XCTAssertLessThanOrEqual(abs(x - y), 1e-6 + 1e-5 * abs(x), "\(name): losses \(x) vs \(y)")
            }
            let worst = zip(whole.weights, resumed.weights).map { abs($0 - $1) }.max() ?? .infinity
            XCTAssertEqual(whole.weights.count, resumed.weights.count)
            XCTAssertLessThanOrEqual(worst, 1e-5, "\(name): weights differ by \(worst)")
        }
    }

    /// A rank killed mid-run: mpirun ends the other, which says why, well within a bound; the
    /// checkpoint written before is a whole model.
    func testAKilledRankEndsTheOtherWithANamedError() throws {
        let mpirun = try MPITestSupport.mpirun()
        let name = "killed"
        let checkpoint = Self.files.file("\(name).mlmodel")
        let run = try start(mpirun, try MPITestSupport.arguments(ranks: 2, trainArguments(
            name, epochs: 50, batch: 1, ["--compute-units", "cpuOnly", "--checkpoint-every", "1"])))
        // Wait for the first checkpoint (and a step or more after it), then kill rank 1.
        let deadline = Date().addingTimeInterval(60)
        while !FileManager.default.fileExists(atPath: checkpoint.path), Date() < deadline, run.0.isRunning {
            Thread.sleep(forTimeInterval: 0.05)
        }
        Thread.sleep(forTimeInterval: 0.2)
        let ranks = MPITestSupport.ranks(of: run.0.processIdentifier)
        guard let victim = ranks[1] else {
            run.0.terminate()
            _ = finish(run)
            return XCTFail("rank 1 of the run was not found among mpirun's children: \(ranks)")
        }
        let killed = Date()
        kill(victim, SIGKILL)
        let result = finish(run)
        let seconds = Date().timeIntervalSince(killed)
        XCTAssertNotEqual(result.status, 0)
        XCTAssertLessThan(seconds, 30, "the run went on \(seconds) s after a rank died")
        XCTAssertTrue(result.stderr.contains("rank 0 of 2 stopped: mpirun ended this rank because another rank died or failed"),
                      result.stderr)
        let model = try CoreMLModel(contentsOf: checkpoint)
        XCTAssertEqual(try model.weights(ofLayer: "dense").data.count, 512)
    }

    /// A rank that stops answering (stopped, not dead): the other gives up after UPDRAFT_MPI_TIMEOUT
    /// with an error naming the wait.
    func testAHungRankEndsTheOtherAfterTheTimeLimit() throws {
        let mpirun = try MPITestSupport.mpirun()
        let name = "hung"
        let checkpoint = Self.files.file("\(name).mlmodel")
        let run = try start(mpirun, try MPITestSupport.arguments(ranks: 2, environment: [MPIWorld.timeoutVariable: "2"], trainArguments(
            name, epochs: 50, batch: 1, ["--compute-units", "cpuOnly", "--checkpoint-every", "1"])))
        let deadline = Date().addingTimeInterval(60)
        while !FileManager.default.fileExists(atPath: checkpoint.path), Date() < deadline, run.0.isRunning {
            Thread.sleep(forTimeInterval: 0.05)
        }
        guard let victim = MPITestSupport.ranks(of: run.0.processIdentifier)[1] else {
            run.0.terminate()
            _ = finish(run)
            return XCTFail("rank 1 of the run was not found among mpirun's children")
        }
        kill(victim, SIGSTOP)
        let result = finish(run)
        XCTAssertNotEqual(result.status, 0)
        XCTAssertTrue(result.stderr.contains("rank 0 of 2: no answer from the other ranks within 2 s"), result.stderr)
        XCTAssertNoThrow(try CoreMLModel(contentsOf: checkpoint))
    }
}

/// The parts of multi-rank training that need no MPI: launch detection, sharding, buckets.
final class DistributedTrainingTests: XCTestCase {
    func testMPIIsJoinedOnlyWhenLaunchedByMpirun() throws {
        XCTAssertFalse(MPIWorld.isLaunched(environment: ["PATH": "/usr/bin"]))
        XCTAssertNil(try DistributedTraining.launched(environment: [:]))
        XCTAssertTrue(MPIWorld.isLaunched(environment: ["OMPI_COMM_WORLD_SIZE": "2"]))
        XCTAssertTrue(MPIWorld.isLaunched(environment: ["PMIX_RANK": "0"]))
    }

    func testEachRankTakesItsExamplesAndTheWeightsAddUpToOne() {
        let batch = [7, 2, 9, 4, 4, 11, 0]
        let r0 = DistributedTraining.share(of: batch, rank: 0, size: 3)
        let r1 = DistributedTraining.share(of: batch, rank: 1, size: 3)
        let r2 = DistributedTraining.share(of: batch, rank: 2, size: 3)
        XCTAssertEqual(r0.local, [9, 0])
        XCTAssertEqual(r1.local, [7, 4, 4])
        XCTAssertEqual(r2.local, [2, 11])
        XCTAssertEqual(r0.weights, [2.0 / 7, 3.0 / 7, 2.0 / 7])
        XCTAssertEqual(r0.weights, r2.weights)
        XCTAssertEqual(r0.weights.reduce(0, +), 1, accuracy: 1e-12)
    }

    func testBucketsFollowBackwardOrderAndKeepLayersWhole() {
        let tensors: [(layer: String, count: Int)] = [("a", 1000), ("a", 10), ("b", 300), ("c", 50), ("c", 2), ("d", 5)]
        // 1 KiB buckets, from the last layer: d+c (228 B) + b (1200 B) closes; then a.
        XCTAssertEqual(GradientExchange.buckets(tensors, bucketBytes: 1024), [[5, 3, 4, 2], [0, 1]])
        // Tiny buckets: one layer each.
        XCTAssertEqual(GradientExchange.buckets(tensors, bucketBytes: 4), [[5], [3, 4], [2], [0, 1]])
        // Huge: one bucket of everything.
        XCTAssertEqual(GradientExchange.buckets(tensors, bucketBytes: 1 << 30), [[5, 3, 4, 2, 0, 1]])
    }
}
