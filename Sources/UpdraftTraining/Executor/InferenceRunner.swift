import Foundation
import UpdraftCore
import UpdraftBackends
import UpdraftModel
import UpdraftLayers
import UpdraftPlacement
import UpdraftData

/// Forward-only work (evaluation, prediction) on a chosen device, with training's fallback: when the
/// device fails (a kernel that does not build, memory that runs out, a device error), one warning
/// names it, the reason and where the work goes on, and the batch runs again on the next fallback
/// device (the host CPU backend unless the work already runs on the host). Data and model errors
/// are not device failures and go straight to the caller.
public final class InferenceRunner {
    /// The network run forward (as an inference-only training graph: every layer in the prefix).
    public let graph: NetworkGraph
    /// The executor the work runs on now; replaced by one on the next fallback when a device fails.
    public private(set) var executor: Executor
    /// Devices not used yet, in the order they are tried.
    public private(set) var fallbacks: [Backend]
    private let warn: (String) -> Void

    /// - Parameters:
    ///   - fallbacks: nil: the host CPU backend, unless `prefix` and `tail` are host backends already.
    ///   - environment: the run's `UPDRAFT_*` settings, which that host backend is made with.
    public init(graph: NetworkGraph, prefix: Backend, tail: Backend, fallbacks: [Backend]? = nil,
                environment: UpdraftEnvironment = .process, warn: @escaping (String) -> Void) throws {
        self.graph = graph
        self.warn = warn
        var left = fallbackBackends(fallbacks, running: [prefix, tail], environment: environment)
        let training = TrainingGraph.inference(graph: graph)
        do {
            executor = try Executor(training: training, optimizer: .sgd, prefixBackend: prefix, tailBackend: tail)
        } catch where isDeviceFailure(error) {
            let name = prefix === tail ? tail.name : "\(prefix.name) + \(tail.name)"
            executor = try Self.takeOver(training: training, fallbacks: &left,
                                         problems: ["cannot start on \(name) (\(firstLine(of: error)))"], warn: warn)
        }
        self.fallbacks = left
    }

    /// Throws a named error when batches of `batchSize` would not fit the current device's memory or
    /// the host's (`MemoryPreflight`), saying the largest batch that fits.
    public func checkMemory(batchSize: Int, work: MemoryPreflight.Work) throws {
        try MemoryPreflight.check(graph: graph, batchSize: batchSize, work: work,
                                  prefix: executor.prefixBackend, tail: executor.tailBackend)
    }

    /// Makes the current device ready for forward passes of `batchSize` examples before the first
    /// one (`Executor.prepare`: OpenCL's programs built together, oneDNN's primitives made), and
    /// returns the seconds it took. A failure is a warning, not an error: the first pass then makes
    /// what it needs itself (and meets the error where the fallback handles it).
    /// - Parameter pixels: whether batches come as 8-bit images (`PixelBatchProvider`) rather than tensors.
    @discardableResult
    public func prepare(batchSize: Int, pixels: Bool) -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        do {
            try executor.prepare(batch: batchSize, pixels: pixels)
        } catch {
            warn("could not prepare \(executor.deviceName) before the first pass (\(firstLine(of: error))); the passes make what they need as they go")
        }
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }

    /// Forward work placed by the scheduler, as `UpdateTask` places training: the devices within
    /// `computeUnits` (or the pinned device) that the cost model picks for `batchSize` examples a pass.
    /// The scheduler's warnings (OpenCL missing, a device left out) go to `warn` first.
    public convenience init(graph: NetworkGraph, computeUnits: ComputeUnits = .default, preferredDevice: DevicePin? = nil,
                            batchSize: Int, warn: @escaping (String) -> Void) throws {
        var configuration = UpdateConfiguration()
        configuration.placement.computeUnits = computeUnits
        configuration.placement.preferredDevice = preferredDevice
        configuration.placement.dataParallelMode = .off
        let schedule = try Scheduler.schedule(graph: graph, batchSize: batchSize, configuration: configuration)
        schedule.warnings.forEach(warn)
        try self.init(graph: graph, prefix: schedule.backends.prefix, tail: schedule.backends.tail, warn: warn)
    }

    /// Where the work runs now ("cpu", "opencl:…").
    public var deviceName: String { executor.deviceName }

    /// `body` on the current executor; after a device failure, again on the next fallback.
    /// - Parameter position: where the work stands, for the warning ("batch 3").
    public func run<T>(position: String, _ body: (Executor) throws -> T) throws -> T {
        while true {
            do {
                return try body(executor)
            } catch where isDeviceFailure(error) {
                let reason = "\(executor.deviceName) failed (\(firstLine(of: error)))"
                guard !fallbacks.isEmpty else {
                    throw UpdraftError(.device, "\(reason); no other device is left to run on",
                                       hint: "use --compute-units cpuOnly, or check the device with `updraft devices`")
                }
                executor = try Self.takeOver(training: executor.training, fallbacks: &fallbacks, problems: [reason],
                                             resume: ", \(position) again", warn: warn)
            }
        }
    }

    private static func takeOver(training: TrainingGraph, fallbacks: inout [Backend], problems: [String], resume: String = "",
                                 warn: (String) -> Void) throws -> Executor {
        var problems = problems
        let (executor, backend) = try takeOverOnFallback(&fallbacks, problems: &problems, work: "run on") {
            try Executor(training: training, optimizer: .sgd, backend: $0)
        }
        warn(problems.joined(separator: "; ") + "; continuing on \(backend.name)\(resume)")
        return executor
    }
}
