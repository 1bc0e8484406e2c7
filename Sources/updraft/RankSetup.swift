import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft train` under mpirun: joins the job (nothing happens without mpirun), leaves stdout and
/// files to rank 0, and turns the launcher's SIGTERM — sent to every rank when one dies — into a
/// named error instead of a silent end.
func joinRanksIfLaunched() throws -> DistributedTraining? {
    guard let d = try DistributedTraining.launched() else { return nil }
    if !d.isPrimary {
        // Rank 0 prints progress; the others keep only their errors and warnings (stderr).
        StandardOutput.silence()
    }
    let message = "updraft: error: \(d.world.name) stopped: mpirun ended this rank because another rank died or failed; "
        + "no checkpoint is written after this point, the last one written is intact\n"
    signal(SIGTERM, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: SIGTERM, queue: .global())
    source.setEventHandler {
        FileHandle.standardError.write(message.data(using: .utf8)!)
        _exit(143)
    }
    source.resume()
    rankSignalSource = source
    return d
}

nonisolated(unsafe) private var rankSignalSource: DispatchSourceSignal?

/// Ends the job's MPI on a rank that completed (a failed rank exits without it: mpirun then ends the others).
func leaveRanks(_ d: DistributedTraining?) { d?.world.finalize() }
