import Foundation
import UpdraftCore
import UpdraftBackends
import UpdraftData

/// Every rank stops on the same error: a rank whose device failed with no fallback allowed, or whose
/// share of validation failed. Thrown on every rank (each names the rank that failed and why), after
/// which rank 0 writes the checkpoint of the last completed step.
struct RankStop: Error, CustomStringConvertible {
    var error: UpdraftError
    var description: String { error.description }
}

/// A device failure injected into one rank by `UPDRAFT_TEST_FAIL_RANK=rank:step` (tests of a rank
/// losing its device: the in-process failing backend cannot reach a child process).
public struct InjectedRankFailure: Equatable, Sendable {
    /// The rank (of MPI_COMM_WORLD) whose device fails, and the step (1 = the run's first optimizer
    /// step, counted over epochs; a resumed run counts on from its checkpoint's steps) it fails in.
    public var rank: Int
    public var step: Int

    /// The environment variable: `rank:step`, e.g. `1:3`. Not for production runs.
    public static let variable = "UPDRAFT_TEST_FAIL_RANK"

    /// The failure `environment` asks for, nil when the variable is not set.
    public static func requested(_ environment: [String: String]) throws -> InjectedRankFailure? {
        guard let text = environment[variable], !text.isEmpty else { return nil }
        let parts = text.split(separator: ":").map { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard parts.count == 2, let rank = parts[0], let step = parts[1], rank >= 0, step >= 1 else {
            throw UpdraftError(.invalidArgument, "\(variable) must be RANK:STEP (rank 0 or more, step 1 or more), got '\(text)'",
                               hint: "unset it: it is a test hook that makes one rank's device fail")
        }
        return InjectedRankFailure(rank: rank, step: step)
    }
}

/// The injected failure, a device failure like an OpenCL error.
struct InjectedDeviceFailure: DeviceFailure, CustomStringConvertible {
    var failure: InjectedRankFailure
    var description: String {
        "injected device failure (\(InjectedRankFailure.variable)=\(failure.rank):\(failure.step))"
    }
}

extension DistributedTraining {
    /// Every rank says whether it can go on (`failure` nil) or not (why); when one cannot, every
    /// rank throws the same `RankStop` naming it. Every rank must call it at the same point.
    func agree(_ what: String, failure: String?, hint: String = "fix what the failed rank reports, then run again") throws {
        let w = world
        let statuses = try w.run("agreeing on \(what)") { try w.allgather([failure == nil ? 0 : 1]) }
        guard statuses.contains(where: { $0[0] != 0 }) else { return }
        let messages = try w.run("gathering the ranks' errors") { try w.allgather(failure ?? "", limit: 2048) }
        let places = try w.run("gathering the ranks' hosts") { try w.allgather("host \(w.host), local rank \(w.localRank)") }
        let failed = statuses.indices.filter { statuses[$0][0] != 0 }
        let named = failed.map { "rank \($0) of \(w.size) (\(places[$0])): \(messages[$0])" }
        w.stoppedTogether = true
        throw RankStop(error: UpdraftError(.ranks,
            "\(what) failed on " + named.joined(separator: "; ") + "; every rank stops",
            hint: hint))
    }

    /// Validation split across ranks: each rank evaluated the chunks it owns (`mine`, chunk index to
    /// its summed loss, correct and count) and counted a confusion matrix over them; returns the
    /// whole set's sums, added in chunk order (so equal to one process's to the last bit) and the
    /// matrices added. `failure`: why this rank's share failed (then every rank stops).
    func reduceValidation(chunks: Int, mine: [Int: (lossSum: Double, correct: Int, count: Int)], confusion: [[Int]],
                          failure: String?) throws -> (lossSum: Double, correct: Int, seen: Int, confusion: [[Int]]) {
        do { try agree("validation", failure: failure) } catch let stop as RankStop { throw stop.error }
        var values = [Double](repeating: 0, count: 3 * chunks)
        for (c, r) in mine { values[3 * c] = r.lossSum; values[3 * c + 1] = Double(r.correct); values[3 * c + 2] = Double(r.count) }
        values += confusion.flatMap { $0.map(Double.init) }
        let all = try world.run("the exchange of validation results") { [world] in try world.allgather(values) }
        var lossSum = 0.0, correct = 0, seen = 0
        for c in 0..<chunks {
            let owner = all[c % world.size]
            lossSum += owner[3 * c]; correct += Int(owner[3 * c + 1]); seen += Int(owner[3 * c + 2])
        }
        var total = confusion
        let classes = confusion.count
        for r in all.indices where r != world.rank {
            for t in 0..<classes { for p in 0..<classes { total[t][p] += Int(all[r][3 * chunks + t * classes + p]) } }
        }
        return (lossSum, correct, seen, total)
    }
}

extension GradientExchange {
    /// Throws the injected device failure when `UPDRAFT_TEST_FAIL_RANK` names this rank and `step`
    /// (once: the device that takes over does not fail).
    func injectFailureIfDue(step: Int) throws {
        guard let injected = distributed.injectedFailure, !injectionFired,
              injected.rank == world.rank, injected.step == step else { return }
        injectionFired = true
        throw InjectedDeviceFailure(failure: injected)
    }

    /// After a step in which some rank's device failed: that rank carries on on a fallback device
    /// (`recover`) or cannot (no fallback allowed, or none that works); every rank learns which,
    /// so all take the step again, or all stop with the same error.
    func agreeOnRecovery(position: String, _ recover: () throws -> Void) throws {
        var problem: String? = nil
        do { try recover() } catch { problem = firstLine(of: error) }
        try distributed.agree("the step at \(position)", failure: problem,
                              hint: "the checkpoint (rank 0 writes it) holds the last completed step: check the device (`updraft devices`) "
                                  + "or allow the fallback to the CPU (drop --no-fallback), then continue with --resume")
    }
}
