import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftData
@testable import UpdraftTraining

/// A finished task releases everything it allocated, host and device: twenty tasks in one process
/// end where the first left resident memory and the live OpenCL buffers (finding 11 of issue 13).
final class TrainingTaskMemoryTests: XCTestCase {
    /// x[512] -> frozen dense(512) -> ReLU -> dense(256) -> dense(4) -> softmax, the last two trained
    /// with SGD and momentum: 1.5 MiB of weights, copied into the graph and the executor, with
    /// gradients and velocities besides, so a task that keeps what it allocated shows at once.
    static func model() throws -> CoreMLModel {
        var b = try ModelBuilder(input: FeatureDescription(name: "x", type: .multiArray(ArrayFeatureType(shape: [512], dataType: .float32))),
                                 seed: 5)
        try b.innerProduct("frozen", outputChannels: 512)
        try b.activation("relu", .relu)
        try b.innerProduct("hidden", outputChannels: 256)
        try b.innerProduct("head", outputChannels: 4)
        try b.softmax("softmax", output: "probs")
        try b.makeClassifier(labels: .strings(["a", "b", "c", "d"]), probabilities: "probs")
        try b.makeUpdatable(["hidden", "head"])
        try b.setCrossEntropyLoss(input: "probs")
        b.setOptimizer(.sgd(learningRate: 0.01, miniBatchSize: 8, momentum: 0.9))
        b.setEpochs(1)
        return try b.build()
    }

    static func data() throws -> ArrayBatchProvider {
        try ArrayBatchProvider(examples: (0..<32).map { i in
            TrainingExample(input: Tensor(shape: [512], uniformIn: -1...1, seed: UInt64(100 + i)), target: .classIndex(i % 4))
        })
    }

    /// Resident memory now, from /proc/self/statm.
    static func residentBytes() throws -> Int {
        let text = try String(contentsOfFile: "/proc/self/statm", encoding: .utf8)
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { throw UpdraftError(.io, "cannot read /proc/self/statm: \(text)") }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// Runs `count` tasks one after another, each made, run and dropped, and returns what `measure`
    /// says after each.
    func runTasks(_ count: Int, model: CoreMLModel, data: BatchProvider, configure: () throws -> UpdateConfiguration,
                  measure: () throws -> Int) throws -> [Int] {
        var levels: [Int] = []
        for _ in 0..<count {
            try runOne(model: model, data: data, configuration: try configure())
            levels.append(try measure())
        }
        return levels
    }

    /// In a function of its own, so nothing of the task outlives the call; returns a weak reference
    /// to the task, which must be gone.
    @discardableResult
    private func runOne(model: CoreMLModel, data: BatchProvider, configuration: UpdateConfiguration,
                        whileHeld: (UpdateTask) throws -> Void = { _ in }) throws -> WeakTask {
        let task = UpdateTask(model: model, trainingData: data, configuration: configuration)
        let final = task.run()
        XCTAssertEqual(final.task.state, .completed, "\(final.error.map { "\($0)" } ?? "")")
        _ = try task.currentModel()
        try whileHeld(task)
        return WeakTask(task: task)
    }

    struct WeakTask { weak var task: UpdateTask? }

    /// The reference cycle: a task kept its final context, which holds the task. A task nobody holds
    /// is gone; one still held (to read its model) holds no device memory once it has ended.
    func testAnEndedTaskIsReleasedAndHoldsNoBuffersWhileReferenced() throws {
        let context = try OpenCLTestSupport.context()
        let before = context.liveBufferCount
        var config = UpdateConfiguration()
        let backend = OpenCLBackend(context: context)
        config.placement.backends = (backend, backend)
        let gone = try runOne(model: try Self.model(), data: try Self.data(), configuration: config) { task in
            XCTAssertNil(task.session, "the session is released when the task ends")
            XCTAssertEqual(try task.weights(ofLayer: "head").weights.count, 4 * 256, "the trained model stays")
            // Staging buffers of the last uploads belong to the caller's backend until their copies
            // complete; the backend's synchronize drops them (timing otherwise decides the count).
            try backend.synchronize()
            XCTAssertEqual(context.liveBufferCount - before, 0, "no buffers held by the ended task")
        }
        XCTAssertNil(gone.task, "the task is freed when the caller lets go of it")
    }

    func testTwentyTasksOnTheCPUEndWhereTheFirstLeftResidentMemory() throws {
        let model = try Self.model(), data = try Self.data()
        let levels = try runTasks(20, model: model, data: data, configure: {
            var config = UpdateConfiguration()
            let cpu = CPUBackend()
            config.placement.backends = (cpu, cpu)
            return config
        }, measure: Self.residentBytes)
        let mib = levels.map { String(format: "%.1f", Double($0) / 1048576) }
        print("resident MiB after each of 20 CPU tasks: \(mib.joined(separator: " "))")
        // A task that kept what it allocated (about 5 MiB: weights, gradients, velocities,
        // workspaces, the cache) would add that much each time; the allocator's slack is far less.
        XCTAssertLessThan(levels.last! - levels.first!, 8 << 20, "resident memory grew task after task: \(mib) MiB")
    }

    func testTwentyTasksOnOpenCLLeaveNoBuffersBehind() throws {
        let context = try OpenCLTestSupport.context()
        let model = try Self.model(), data = try Self.data()
        let before = context.liveBufferCount
        let levels = try runTasks(20, model: model, data: data, configure: {
            var config = UpdateConfiguration()
            let backend = OpenCLBackend(context: context)
            // With the CPU as fallback, so snapshots and the steps since them are kept too.
            config.placement.backends = (backend, backend)
            return config
        }, measure: { context.liveBufferCount })
        print("live OpenCL buffers after each of 20 tasks: \(levels)")
        XCTAssertEqual(Set(levels), [before], "every task's buffers are released when it ends: \(levels), \(before) before")
    }
}
