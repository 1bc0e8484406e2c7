import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftData
@testable import UpdraftTraining

/// A device that fails mid-training (injected with `FailingBackend`) costs a one-line warning, never
/// the run: training goes on from the last completed mini-batch on what is left, and ends where an
/// uninterrupted run on the fallback device ends.
final class TrainingFallbackTests: SqueezeShapedRunTestCase {

    /// An uninterrupted run on one backend.
    func baseline(_ backend: Backend) throws -> TrainingRun {
        try run { $0.placement.backends = (backend, backend) }
    }

    func assertOneWarning(_ run: TrainingRun, mentions parts: [String], file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(run.warnings.count, 1, "\(run.warnings)", file: file, line: line)
        XCTAssertEqual(run.handlerWarnings, run.warnings, "the handler sees each warning as it happens", file: file, line: line)
        for part in parts {
            XCTAssertTrue(run.warnings.first?.contains(part) ?? false, "'\(part)' missing from \(run.warnings)", file: file, line: line)
        }
        XCTAssertFalse(run.warnings.first?.contains("\n") ?? true, "one line", file: file, line: line)
    }

    // MARK: One device

    /// A device error in the loss of epoch 1's second mini-batch: the step is taken again on the
    /// fallback from the state after the first, and the run ends exactly where an uninterrupted one does.
    func testDeviceErrorMidEpochResumesOnTheFallbackWithNothingLost() throws {
        let failing = FailingBackend(ReferenceBackend(), failing: .softmaxCrossEntropy, onCall: 2)
        let recovered = try run { $0.placement.backends = (failing, failing); $0.placement.fallbacks = [ReferenceBackend()] }
        let expected = try baseline(ReferenceBackend())
        assertSameTraining(recovered, expected, tolerance: 0, "resumed on the reference backend")
        XCTAssertEqual(failing.failures, 1)
        XCTAssertEqual(recovered.losses.count, 6, "the failed mini-batch is reported once, after it completed")
        assertOneWarning(recovered, mentions: ["failing(reference) failed", "CL_OUT_OF_RESOURCES", "continuing on reference",
                                               "epoch 1 mini-batch 2"])
        XCTAssertEqual(recovered.epochs.map(\.device), ["reference", "reference"])
    }

    /// A device that dies in the backward pass and answers nothing afterwards: the host snapshot of
    /// the last completed step (kept because a fallback exists) carries training to the CPU backend,
    /// which is the automatic fallback for a device that is not the host.
    func testLostDeviceResumesFromTheSnapshotOnTheCPU() throws {
        // Three convolutions train, so call 5 of their weight gradients is in step 2.
        let failing = FailingBackend(CPUBackend(), failing: .convolutionBackwardWeights, onCall: 5, deadAfterFailure: true)
        let recovered = try run { $0.placement.backends = (failing, failing) }
        assertSameTraining(recovered, try baseline(CPUBackend()), tolerance: 1e-6, "resumed on the CPU")
        assertOneWarning(recovered, mentions: ["failing(cpu) failed", "continuing on cpu", "epoch 1 mini-batch 2"])
        XCTAssertEqual(recovered.task.ended?.devices.snapshotCount, 1,
                       "a snapshot after step 1; none on the CPU, with nothing left to fall back to")
    }

    /// A failure part-way through the optimizer update (3rd of 8 tensors of step 2): the device's
    /// state belongs to no step, so the snapshot restores the state after step 1.
    func testFailureInsideTheUpdateRestoresTheSnapshot() throws {
        let failing = FailingBackend(ReferenceBackend(), failing: .sgdStep, onCall: 8 + 3)
        let recovered = try run { $0.placement.backends = (failing, failing); $0.placement.fallbacks = [ReferenceBackend()] }
        assertSameTraining(recovered, try baseline(ReferenceBackend()), tolerance: 0, "mid-update failure")
        assertOneWarning(recovered, mentions: ["continuing on reference"])

        // Without snapshots nothing can restore it: training stops with an error saying so.
        let lost = FailingBackend(ReferenceBackend(), failing: .sgdStep, onCall: 8 + 3)
        let failed = try run { $0.placement.backends = (lost, lost); $0.placement.fallbacks = [ReferenceBackend()]; $0.placement.snapshots = .never }
        XCTAssertEqual(failed.state, .failed)
        XCTAssertTrue("\(failed.error!)".contains("could not be read back"), "\(failed.error!)")
        XCTAssertTrue("\(failed.error!)".contains("failing(reference) failed"), "\(failed.error!)")
    }

    /// Without snapshots, a device that still answers hands over its own state: after a failure in
    /// the forward pass, and after one on the first tensor of an update (nothing changed yet).
    func testWithoutSnapshotsTheFailedDeviceIsReadBack() throws {
        let expected = try baseline(ReferenceBackend())
        for (op, call) in [(FailingBackend.Op.poolingForward, 5), (.sgdStep, 8 + 1)] {
            let failing = FailingBackend(ReferenceBackend(), failing: op, onCall: call)
            let recovered = try run { $0.placement.backends = (failing, failing); $0.placement.fallbacks = [ReferenceBackend()]; $0.placement.snapshots = .never }
            assertSameTraining(recovered, expected, tolerance: 0, "read back after \(op)")
            assertOneWarning(recovered, mentions: ["continuing on reference"])
            XCTAssertEqual(recovered.task.ended?.devices.snapshotCount, 0)
        }
    }

    /// Snapshots every third step: a device lost in step 5 hands over the snapshot after step 3, the
    /// fallback takes step 4 again (same examples, same hyperparameters), then step 5, and the run
    /// ends where an uninterrupted one on the fallback ends.
    func testStepsSinceTheSnapshotAreTakenAgain() throws {
        let failing = FailingBackend(CPUBackend(), failing: .softmaxCrossEntropy, onCall: 5, deadAfterFailure: true)
        let recovered = try run { $0.placement.backends = (failing, failing); $0.placement.snapshots = .every(3) }
        assertSameTraining(recovered, try baseline(CPUBackend()), tolerance: 1e-6, "replayed on the CPU")
        assertOneWarning(recovered, mentions: ["failing(cpu) failed", "continuing on cpu", "epoch 2 mini-batch 2"])
        let devices = try XCTUnwrap(recovered.task.ended?.devices)
        XCTAssertEqual(devices.snapshotCount, 1, "after step 3")
        XCTAssertEqual(devices.replayedSteps, 1, "step 4")
        XCTAssertEqual(recovered.losses.count, 6, "replayed steps are not reported again")

        // Lost before the first snapshot is due: the fallback starts from the model and takes steps 1 and 2 again.
        let early = FailingBackend(CPUBackend(), failing: .softmaxCrossEntropy, onCall: 3, deadAfterFailure: true)
        let fromStart = try run { $0.placement.backends = (early, early); $0.placement.snapshots = .every(4) }
        assertSameTraining(fromStart, try baseline(CPUBackend()), tolerance: 1e-6, "replayed from the start")
        XCTAssertEqual(fromStart.task.ended?.devices.replayedSteps, 2)
    }

    /// The automatic interval: every step until a snapshot has been timed, then as many steps as keep
    /// snapshots at 2% of step time, never more than 20.
    func testAutomaticSnapshotIntervalFollowsTheCost() {
        XCTAssertEqual(TrainingDevices.automaticInterval(snapshotSeconds: 0, snapshots: 0, stepSeconds: 0, steps: 0), 1)
        XCTAssertEqual(TrainingDevices.automaticInterval(snapshotSeconds: 0.0001, snapshots: 1, stepSeconds: 0.1, steps: 1), 1)
        XCTAssertEqual(TrainingDevices.automaticInterval(snapshotSeconds: 0.002, snapshots: 2, stepSeconds: 0.02, steps: 2), 5)
        XCTAssertEqual(TrainingDevices.automaticInterval(snapshotSeconds: 1, snapshots: 1, stepSeconds: 0.001, steps: 1), 20)
        XCTAssertEqual(TrainingDevices.automaticInterval(snapshotSeconds: 1, snapshots: 1, stepSeconds: 0, steps: 1), 1)
    }

    /// The device dies while the step's snapshot is read back: the step is lost with it, and taken
    /// again from the previous snapshot.
    func testFailureWhileTakingTheSnapshotRedoesTheStep() throws {
        // Count the downloads of an undisturbed run: the last ones of each step are its snapshot.
        let counter = FailingBackend(ReferenceBackend())
        let downloadsAfterStep = Locked<[Int]>([])
        let task = UpdateTask(model: try model.get(), trainingData: try data.get(), configuration: {
            var c = UpdateConfiguration(); c.placement.backends = (counter, counter); c.placement.fallbacks = [ReferenceBackend()]; c.placement.snapshots = .every(1); return c
        }(), handlers: UpdateHandlers(events: [.miniBatchEnd], progress: { [counter = UncheckedSendable(counter)] _ in downloadsAfterStep.append(counter.value.calls[.download] ?? 0) }))
        XCTAssertEqual(task.run().task.state, .completed)
        let failing = FailingBackend(ReferenceBackend(), failing: .download, onCall: downloadsAfterStep.value[2], deadAfterFailure: true)
        let recovered = try run { $0.placement.backends = (failing, failing); $0.placement.fallbacks = [ReferenceBackend()]; $0.placement.snapshots = .every(1) }
        assertSameTraining(recovered, try baseline(ReferenceBackend()), tolerance: 0, "snapshot failure")
        assertOneWarning(recovered, mentions: ["epoch 1 mini-batch 3"])
    }

    /// Memory that runs out: when training starts (the parameters do not fit) and mid-training
    /// (the short last batch's buffers).
    func testOutOfMemoryFallsBack() throws {
        let oom = OpenCLError(-4, "clCreateBuffer", "allocating 4 MB")
        let atStart = FailingBackend(CPUBackend(), failing: .makeBuffer, onCall: 1, error: oom)
        let started = try run { $0.placement.backends = (atStart, atStart) }
        assertSameTraining(started, try baseline(CPUBackend()), tolerance: 1e-6, "out of memory at the start")
        assertOneWarning(started, mentions: ["cannot start training on failing(cpu)", "CL_MEM_OBJECT_ALLOCATION_FAILURE", "continuing on cpu"])

        // With 10 examples the third batch of each epoch is short (2) and gets buffers of its own.
        let data = try SqueezeShaped.data(count: 10)
        let counter = FailingBackend(CPUBackend())
        let recordedBuffers = Locked<[Int]>([])
        _ = UpdateTask(model: try model.get(), trainingData: data, configuration: {
            var c = UpdateConfiguration(); c.placement.backends = (counter, counter); c.data.shortLastBatch = true; return c
        }(), handlers: UpdateHandlers(events: [.miniBatchEnd], progress: { [counter = UncheckedSendable(counter)] _ in recordedBuffers.append(counter.value.calls[.makeBuffer] ?? 0) })).run()
        let buffersAfterStep = recordedBuffers.value
        XCTAssertGreaterThan(buffersAfterStep[2], buffersAfterStep[1], "the short batch allocates")
        let midway = FailingBackend(CPUBackend(), failing: .makeBuffer, onCall: buffersAfterStep[1] + 1, error: oom)
        let recovered = try TrainingRun.train(try model.get(), data) { $0.placement.backends = (midway, midway); $0.data.shortLastBatch = true }
        let expected = try TrainingRun.train(try model.get(), data) { $0.placement.backends = (CPUBackend(), CPUBackend()); $0.data.shortLastBatch = true }
        assertSameTraining(recovered, expected, tolerance: 1e-6, "out of memory mid-training")
        assertOneWarning(recovered, mentions: ["CL_MEM_OBJECT_ALLOCATION_FAILURE", "epoch 1 mini-batch 3"])
    }

    /// A kernel that does not build on a real OpenCL device (here: whatever the device cannot run;
    /// until the GEMM kernels land, convolution is not implemented on OpenCL at all): the run
    /// completes, on the CPU if it had to, equal to a CPU run.
    func testRealOpenCLDeviceTrainsOrFallsBackToTheCPU() throws {
        let device = try OpenCLTestSupport.context().device
        let (golden, model) = try GoldenRun.load("branches_sgd")
        let data = try ArrayBatchProvider(examples: golden.examples)
        let openCL = try OpenCLBackend(device: device)
        let run = try TrainingRun.train(model, data) { $0.placement.backends = (openCL, openCL) }
        let cpu = try TrainingRun.train(model, data) { $0.placement.backends = (CPUBackend(), CPUBackend()) }
        assertSameTraining(run, cpu, tolerance: 1e-4, "OpenCL or its fallback")
        XCTAssertLessThanOrEqual(run.warnings.count, 1, "\(run.warnings)")
        if let w = run.warnings.first {
            XCTAssertTrue(w.hasPrefix("\(openCL.name) failed ("), w)
            XCTAssertTrue(w.contains("continuing on cpu"), w)
            XCTAssertEqual(run.epochs.last?.device, "cpu")
        }
    }

    /// A kernel that does not build (its compiler log runs over several lines): the warning is still
    /// one line, naming the call and the status.
    func testKernelThatDoesNotBuildGivesAOneLineWarning() throws {
        let buildFailure = OpenCLError(-11, "clBuildProgram", "building pooling.cl for the device",
                                       buildLog: "pooling.cl:12: error: use of undeclared identifier\n1 error generated.")
        let failing = FailingBackend(CPUBackend(), failing: .poolingForward, onCall: 1, error: buildFailure)
        let recovered = try run { $0.placement.backends = (failing, failing) }
        assertSameTraining(recovered, try baseline(CPUBackend()), tolerance: 1e-6, "build failure")
        assertOneWarning(recovered, mentions: ["clBuildProgram failed with CL_BUILD_PROGRAM_FAILURE", "continuing on cpu",
                                               "epoch 1 mini-batch 1"])
        XCTAssertFalse(recovered.warnings[0].contains("undeclared"), "the build log stays out of the one line")
    }

    /// A failure while validating after an epoch: validation runs again on the fallback, and
    /// training goes on there.
    func testFailureDuringValidationFallsBack() throws {
        let validation = try SqueezeShaped.data(count: 5, seed: 77)
        // Steps 1-3 compute one loss each; validation after epoch 1 computes the 4th and 5th.
        let failing = FailingBackend(ReferenceBackend(), failing: .softmaxCrossEntropy, onCall: 4)
        let recovered = try run { $0.placement.backends = (failing, failing); $0.placement.fallbacks = [ReferenceBackend()]; $0.data.validationData = validation }
        let expected = try run { $0.placement.backends = (ReferenceBackend(), ReferenceBackend()); $0.data.validationData = validation }
        assertSameTraining(recovered, expected, tolerance: 0, "validation failure")
        XCTAssertEqual(recovered.epochs.map(\.validationLoss), expected.epochs.map(\.validationLoss))
        assertOneWarning(recovered, mentions: ["validation after epoch 1 again", "continuing on reference"])
    }

    // MARK: What is not a device failure, and what cannot be recovered

    func testDataErrorsEndTrainingWithoutFallingBack() throws {
        var examples = try SqueezeShaped.data(count: 8).examples
        examples[5].target = .classIndex(9)
        let failing = FailingBackend(CPUBackend())
        let run = try TrainingRun.train(try model.get(), try ArrayBatchProvider(examples: examples)) {
            $0.placement.backends = (failing, failing)
            $0.shuffle(false)
        }
        XCTAssertEqual(run.state, .failed)
        XCTAssertEqual((run.error as? UpdraftError)?.kind, .data, "\(run.error!)")
        XCTAssertEqual(run.warnings, [])
    }

    func testWithoutAFallbackTheDeviceErrorEndsTraining() throws {
        let failing = FailingBackend(CPUBackend(), failing: .poolingForward, onCall: 3)
        let run = try run { $0.placement.backends = (failing, failing); $0.placement.fallbacks = [] }
        XCTAssertEqual(run.state, .failed)
        XCTAssertTrue("\(run.error!)".contains("no other device is left"), "\(run.error!)")
        XCTAssertTrue("\(run.error!)".contains("CL_OUT_OF_RESOURCES"), "\(run.error!)")
        XCTAssertEqual(run.task.ended?.devices.snapshotCount, 0, "no fallback, so no snapshots")
    }

    /// Training on the host alone has nowhere to fall back to and pays nothing for snapshots.
    func testHostOnlyTrainingKeepsNoSnapshots() throws {
        let run = try baseline(CPUBackend())
        XCTAssertEqual(run.task.ended?.devices.snapshotCount, 0)
        XCTAssertEqual(run.task.ended?.devices.fallbackCount, 0)
    }

    // MARK: Data parallel

    /// One replica fails computing its slice: the other takes the whole batch from then on.
    func testFailedReplicaLeavesTheOthers() throws {
        let failing = FailingBackend(CPUBackend(), failing: .softmaxCrossEntropy, onCall: 2)
        let recovered = try run { $0.placement.dataParallel = DataParallelism(replicas: [CPUBackend(), failing]) }
        assertSameTraining(recovered, try baseline(CPUBackend()), "one replica lost")
        assertOneWarning(recovered, mentions: ["failing(cpu) failed", "continuing on cpu from the last completed step",
                                               "epoch 1 mini-batch 2 again"])
        XCTAssertEqual(recovered.task.ended?.devices.replicaCount, 1)
    }

    /// A replica fails applying the update: the others applied it, so the step stands.
    func testReplicaFailingInTheUpdateIsDropped() throws {
        let failing = FailingBackend(ReferenceBackend(), failing: .sgdStep, onCall: 8 + 3)
        let recovered = try run { $0.placement.dataParallel = DataParallelism(replicas: [failing, CPUBackend()]) }
        assertSameTraining(recovered, try baseline(CPUBackend()), "replica lost in the update")
        assertOneWarning(recovered, mentions: ["failing(reference) failed while applying the update", "continuing on cpu"])
        XCTAssertEqual(recovered.losses.count, 6)
    }

    /// Both replicas fail at once (two contexts of one device failing the same kernel), and stay
    /// dead: training goes on on the CPU from the snapshot.
    func testEveryReplicaFailingFallsBackToTheCPU() throws {
        let a = FailingBackend(ReferenceBackend(), failing: .concatForward, onCall: 3, deadAfterFailure: true, name: "gpu0")
        let b = FailingBackend(ReferenceBackend(), failing: .concatForward, onCall: 3, deadAfterFailure: true, name: "gpu1")
        let recovered = try run { $0.placement.dataParallel = DataParallelism(replicas: [a, b]); $0.featureCache.enabled = false }
        assertSameTraining(recovered, try baseline(CPUBackend()), "both replicas lost")
        assertOneWarning(recovered, mentions: ["gpu0, gpu1 failed", "continuing on cpu", "epoch 1 mini-batch 3"])
    }

    /// A replica that cannot even start is left out; training runs on the rest.
    func testReplicaThatCannotStartIsLeftOut() throws {
        let broken = FailingBackend(CPUBackend(), failing: .makeBuffer, onCall: 1, error: UpdraftError(.device, "device lost"))
        let run = try run { $0.placement.dataParallel = DataParallelism(replicas: [broken, CPUBackend(), CPUBackend()]) }
        assertSameTraining(run, try baseline(CPUBackend()), "a replica left out")
        assertOneWarning(run, mentions: ["cannot start a replica on failing(cpu) (device lost)", "cpu + cpu (data parallel)"])
    }
}

private extension UpdateConfiguration {
    mutating func shuffle(_ on: Bool) { parameters[.shuffle] = .bool(on) }
}
