import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftData
@testable import UpdraftTraining

/// Issue 26, item 4: float examples (the `BatchProvider` path, no pixel upload) are stacked in one
/// host array per executor, reused batch after batch, instead of a new array per mini-batch: the
/// bytes the trainer allocates for its batches do not grow with the number of batches.
final class TrainingInputStagingTests: XCTestCase {
    /// (allocations, bytes) of every executor's staging after each mini-batch and epoch of a run of
    /// the model's 2 epochs over `examples` examples.
    func stagingCounts(examples: Int, _ devices: (inout UpdateConfiguration) -> Void) throws -> [[(Int, Int)]] {
        var config = UpdateConfiguration()
        devices(&config)
        config.featureCache.enabled = false  // every epoch runs the whole network on the examples
        config.data.validationData = try SqueezeShaped.data(count: 5, seed: 99)  // chunks of 4 and 1 on the primary
        let counts = Locked<[[(Int, Int)]]>([])
        let task = UpdateTask(model: try SqueezeShaped.model(batch: 4), trainingData: try SqueezeShaped.data(count: examples),
                              configuration: config, handlers: UpdateHandlers(progress: { ctx in
            guard ctx.event == .miniBatchEnd || ctx.event == .epochEnd, let devices = ctx.task.session?.devices else { return }
            counts.append(devices.replicas.map { ($0.inputStaging.allocations, $0.inputStaging.allocatedBytes) })
        }))
        let context = task.run()
        XCTAssertEqual(context.task.state, .completed, "\(context.error.map { "\($0)" } ?? "")")
        return counts.value
    }

    func testFloatBatchesReuseTheirStaging() throws {
        let batchBytes = 4 * 3 * 15 * 15 * MemoryLayout<Float>.stride
        let settings: [(String, (inout UpdateConfiguration) -> Void)] = [
            ("cpu", { $0.placement.backends = (CPUBackend(), CPUBackend()) }),
            ("opencl", { c in if let context = try? OpenCLTestSupport.context() { let b = OpenCLBackend(context: context); c.placement.backends = (b, b) } }),
            ("data parallel", { $0.placement.dataParallel = DataParallelism(replicas: [CPUBackend(), CPUBackend()], shares: [3, 1]) }),
        ]
        for (name, devices) in settings {
            // 4 mini-batches an epoch (the last wraps round) against 16, and two epoch ends with validation.
            let short = try stagingCounts(examples: 14, devices), long = try stagingCounts(examples: 62, devices)
            XCTAssertEqual(short.count, 10, name)
            XCTAssertEqual(long.count, 34, name)
            let warm = long[16], last = try XCTUnwrap(long.last), shortLast = try XCTUnwrap(short.last)
            // Warm after the first epoch (its batches, then validation's chunk of 4, which a data-parallel
            // slice of 3 has no room for): nothing more, however many batches follow.
            XCTAssertEqual(last.map(\.0), warm.map(\.0), "\(name): no new staging after the first epoch, over 16 more batches")
            XCTAssertEqual(last.map(\.1), warm.map(\.1), "\(name): no more bytes after the first epoch")
            XCTAssertEqual(last.map(\.0), shortLast.map(\.0), "\(name): 32 batches allocate what 8 do")
            XCTAssertEqual(last.map(\.1), shortLast.map(\.1), "\(name): 32 batches allocate the bytes 8 do")
            XCTAssertTrue(last.allSatisfy { (1...2).contains($0.0) }, "\(name): every executor stacks its batches in its staging: \(last)")
            XCTAssertTrue(last.allSatisfy { $0.1 <= 2 * batchBytes + 64 },
                          "\(name): each executor about one mini-batch's inputs (\(batchBytes) bytes), not one per batch (\(32 * batchBytes) before): \(last)")
        }
    }

    /// The staging array is the examples stacked, and a caller that keeps one only costs that copy.
    func testStagingStacksInOrderAndCopiesOnlyWhatIsKept() throws {
        let staging = InputStaging()
        let a = TrainingExample(input: Tensor(shape: [2], data: [1, 2]), target: .classIndex(0))
        let b = TrainingExample(input: Tensor(shape: [2], data: [3, 4]), target: .classIndex(1))
        XCTAssertEqual(staging.stack([a, b]), [1, 2, 3, 4])
        XCTAssertEqual(staging.stack([b, a]), [3, 4, 1, 2])
        XCTAssertEqual(staging.stack([b]), [3, 4], "a shorter batch fits the same storage")
        XCTAssertEqual(staging.allocations, 1)
        let kept = staging.stack([a, b])
        XCTAssertEqual(staging.stack([b, b]), [3, 4, 3, 4])
        XCTAssertEqual(kept, [1, 2, 3, 4], "what a caller kept is not overwritten")
        XCTAssertEqual(staging.allocations, 2, "keeping one batch cost one copy")
    }

    /// Batches from `InputStaging.parallelFrom` values up are copied by all cores, each example into
    /// its place: the same stacking, the same reuse, and a kept batch still left alone.
    func testLargeBatchesStackInOrderOnAllCores() throws {
        let staging = InputStaging()
        let length = InputStaging.parallelFrom / 5 + 3  // 7 examples pass the threshold; odd lengths
        func example(_ k: Int, _ n: Int = length) -> TrainingExample {
            TrainingExample(input: Tensor(shape: [n], data: (0..<n).map { Float(k * 1_000_000 + $0) }), target: .classIndex(0))
        }
        let seven = (0..<7).map { example($0) }
        XCTAssertGreaterThanOrEqual(7 * length, InputStaging.parallelFrom)
        XCTAssertEqual(staging.stack(seven), seven.flatMap(\.input.data))
        let reversed = Array(seven.reversed())
        XCTAssertEqual(staging.stack(reversed), reversed.flatMap(\.input.data), "the same storage, overwritten in the new order")
        XCTAssertEqual(staging.allocations, 1)
        let kept = staging.stack(seven)
        let mixed = [example(9, length + 2)] + seven.dropLast()  // examples of two lengths
        XCTAssertEqual(staging.stack(mixed), mixed.flatMap(\.input.data))
        XCTAssertEqual(kept, seven.flatMap(\.input.data), "what a caller kept is not overwritten")
        XCTAssertEqual(staging.stack(seven), seven.flatMap(\.input.data), "back to the first size")
    }
}
