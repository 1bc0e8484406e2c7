import Foundation
import UpdraftCore
import UpdraftBackends

/// What a run pays once before its first batch on a device, and the whole job it is paid for.
///
/// An OpenCL device must open a context and make every program the layers launch: built by the
/// driver's compiler the first time (seconds on PoCL, a fraction of one on a GPU driver), loaded
/// from the program binary cache after that (`ProgramBinaryCache`). Calibration measures both for
/// each device (`DeviceProfile.contextSeconds`, `programBuildSeconds`, `programLoadSeconds`); the
/// host CPU pays none of it. With a `Scheduler.Job` the scheduler ranks placements by
/// set-up + batches × per-batch time, so a job of a few examples never goes to a device whose
/// set-up costs more than the CPU needs for the whole job.
extension Scheduler {
    /// The work a plan is for: how many examples, how many passes over them, whether it trains.
    public struct Job: Hashable, Codable, Sendable, CustomStringConvertible {
        /// Examples per pass (at least 1).
        public var examples: Int
        /// Passes over the examples (epochs; 1 for prediction, evaluation or a k-NN update).
        public var passes: Int

        /// A job of `examples` examples, `passes` times.
        public init(examples: Int, passes: Int = 1) {
            self.examples = max(1, examples); self.passes = max(1, passes)
        }

        /// Mini-batches per pass at `batchSize`.
        public func batchesPerPass(batchSize: Int) -> Int { (examples + max(1, batchSize) - 1) / max(1, batchSize) }

        /// "20 examples, 1 pass".
        public var description: String { "\(examples) example\(examples == 1 ? "" : "s"), \(passes) pass\(passes == 1 ? "" : "es")" }
    }

    /// Below this many seconds for the whole job on the CPU, no OpenCL device is opened or calibrated
    /// when nothing measured says a device starts faster: loading a driver, opening a context and
    /// building a program take longer than that on every driver measured (PoCL 0.5-2 s cold, NVIDIA 0.2 s+).
    public static let defaultOpenCLStartSeconds = 0.25
}

/// A device's set-up for a job: its context and the programs its part of the graph needs.
public struct SetupEstimate: Hashable, Codable, Sendable {
    /// `DeviceProfile.identifier`.
    public var device: String
    /// Programs the device's layers need (an estimate: one per op family and direction, see `GraphAnalysis.programCount`).
    public var programs: Int
    /// How many of them the binary cache is expected to hold.
    public var cachedPrograms: Int
    /// Context, builds and loads, in milliseconds.
    public var ms: Double
}

extension DeviceProfile {
    /// Seconds to make `programs` programs of which `cached` come from the binary cache, plus the context.
    func setupSeconds(programs: Int, cached: Int) -> Double {
        if isHost { return 0 }
        let fromCache = min(max(0, cached), programs)
        return contextSeconds + Double(programs - fromCache) * programBuildSeconds + Double(fromCache) * programLoadSeconds
    }
}
