import CMPI
import Foundation
import UpdraftCore
import UpdraftData

/// The processes of one MPI job (`mpirun -np N updraft ...`), joined once per process. Every MPI call
/// runs on one serial queue (MPI_THREAD_SERIALIZED), so that the training thread can wait for a
/// collective with a time limit: a rank that dies or hangs ends the others with a `.ranks` error
/// instead of a hang. MPI is initialised only when `join` is called, which Updraft does only when
/// launched by mpirun (`isLaunched`): a run without mpirun never touches it.
public final class MPIWorld: @unchecked Sendable {
    /// This process's rank, 0..<size; rank 0 writes files and prints progress.
    public let rank: Int
    /// Number of processes in the job (MPI_COMM_WORLD's size), at least 1.
    public let size: Int
    /// This process's rank among the job's processes on its host (`MPI_Comm_split_type` with
    /// `MPI_COMM_TYPE_SHARED`, ordered by world rank), 0..<localSize: it picks the rank's device.
    public let localRank: Int
    /// Processes of the job on this host.
    public let localSize: Int
    /// This host's name as MPI gives it (`MPI_Get_processor_name`).
    public let host: String
    /// Seconds a collective may wait for the other ranks before the run stops with a `.ranks` error
    /// (`UPDRAFT_MPI_TIMEOUT`, default 300: a first step compiles kernels and fills caches).
    public var timeout: Double
    private let comm: MPI_Comm
    private let queue = DispatchQueue(label: "updraft.mpi")

    /// Set by the launchers Updraft knows: Open MPI's mpirun (and PMIx / PMI launchers such as srun).
    public static let launchVariables = ["OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK"]
    /// Environment variable giving `timeout` in seconds (default 300).
    public static let timeoutVariable = "UPDRAFT_MPI_TIMEOUT"

    /// Whether this process was started by an MPI launcher.
    public static func isLaunched(environment: [String: String] = ProcessInfo.processInfo.environment) -> Bool {
        launchVariables.contains { environment[$0] != nil }
    }

    private static let lock = NSLock()
    nonisolated(unsafe) private static var joined: MPIWorld?

    /// The job this process belongs to, initialising MPI the first time.
    public static func join(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> MPIWorld {
        lock.lock(); defer { lock.unlock() }
        if let joined { return joined }
        var timeout = 300.0
        if let t = environment[timeoutVariable] {
            guard let v = Double(t), v > 0 else {
                throw UpdraftError(.invalidArgument, "\(timeoutVariable) must be a number of seconds above 0, got '\(t)'")
            }
            timeout = v
        }
        var provided: Int32 = 0
        let rc = MPI_Init_thread(nil, nil, updraft_mpi_thread_serialized(), &provided)
        guard rc == MPI_SUCCESS else {
            throw UpdraftError(.ranks, "MPI_Init_thread failed (error \(rc))", hint: "check the mpirun command line and the Open MPI installation")
        }
        guard provided >= updraft_mpi_thread_serialized() else {
            throw UpdraftError(.ranks, "this MPI library cannot be called from more than one thread (MPI_THREAD_SERIALIZED)",
                               hint: "use an Open MPI built with thread support (Debian's is)")
        }
        let comm: MPI_Comm = updraft_mpi_comm_world()!
        // Errors come back as return codes (thrown as named errors), not as an abort inside MPI.
        MPI_Comm_set_errhandler(comm, updraft_mpi_errors_return())
        var rank: Int32 = 0, size: Int32 = 0
        MPI_Comm_rank(comm, &rank)
        MPI_Comm_size(comm, &size)
        let (localRank, localSize) = try Self.local(comm, rank: rank)
        var name = [CChar](repeating: 0, count: Int(updraft_mpi_max_processor_name()) + 1)
        var length: Int32 = 0
        let host = MPI_Get_processor_name(&name, &length) == MPI_SUCCESS ? String(cString: name) : ProcessInfo.processInfo.hostName
        let world = MPIWorld(rank: Int(rank), size: Int(size), localRank: localRank, localSize: localSize, host: host,
                             timeout: timeout, comm: comm)
        joined = world
        return world
    }

    private init(rank: Int, size: Int, localRank: Int, localSize: Int, host: String, timeout: Double, comm: MPI_Comm) {
        self.rank = rank; self.size = size; self.localRank = localRank; self.localSize = localSize; self.host = host
        self.timeout = timeout; self.comm = comm
    }

    /// This rank's rank and the rank count on its host: the processes that can share memory
    /// (`MPI_COMM_TYPE_SHARED`, MPI 3, the same in every implementation), ordered by world rank.
    private static func local(_ comm: MPI_Comm, rank: Int32) throws -> (rank: Int, size: Int) {
        var shared: MPI_Comm? = nil
        let rc = MPI_Comm_split_type(comm, updraft_mpi_comm_type_shared(), rank, updraft_mpi_info_null(), &shared)
        guard rc == MPI_SUCCESS, shared != nil else {
            throw UpdraftError(.ranks, "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) failed (error \(rc)): the ranks on this host cannot be counted",
                               hint: "check the mpirun command line and the MPI installation")
        }
        defer { MPI_Comm_free(&shared) }
        var localRank: Int32 = 0, localSize: Int32 = 0
        MPI_Comm_rank(shared, &localRank)
        MPI_Comm_size(shared, &localSize)
        return (Int(localRank), Int(localSize))
    }

    /// "rank 1 of 2", for messages.
    public var name: String { "rank \(rank) of \(size)" }
    /// "rank 1 of 2 (host a, local rank 1)", for messages about a rank's device.
    public var placeName: String { "\(name) (host \(host), local rank \(localRank))" }

    // MARK: Running collectives with a time limit

    /// A collective queued on the MPI queue; `wait` gives its result or throws a `.ranks` error when
    /// the other ranks do not answer within the world's timeout.
    /// The outcome is written before `done` is signalled and read after waiting for it.
    final class Pending<T>: @unchecked Sendable {
        private let done = DispatchSemaphore(value: 0)
        private var outcome: Result<T, Error>?
        let what: String
        unowned let world: MPIWorld
        init(_ what: String, world: MPIWorld) { self.what = what; self.world = world }
        func finish(_ r: Result<T, Error>) { outcome = r; done.signal() }
        func wait(timeout: Double? = nil) throws -> T {
            let limit = timeout ?? world.timeout
            if limit.isFinite {
                if done.wait(timeout: .now() + limit) == .timedOut {
                    world.stalled = true
                    throw UpdraftError(.ranks, "\(world.name): no answer from the other ranks within \(Int(limit)) s during \(what) "
                                       + "(a rank died, hung or lost its device)",
                                       hint: "see the other ranks' errors; \(MPIWorld.timeoutVariable) sets the limit")
                }
            } else {
                done.wait()
            }
            done.signal()
            return try outcome!.get()
        }
    }

    /// Set once a collective timed out: MPI is then stuck and must not be finalised.
    public private(set) var stalled = false
    /// Set when every rank agreed to stop on the same error (a rank's device failed with no
    /// fallback allowed, a rank's validation failed): each rank then ends MPI (`finalize`) and exits
    /// with that error, rather than leaving mpirun to end the others.
    public internal(set) var stoppedTogether = false

    /// Queues `body` on the MPI queue and returns at once.
    func start<T>(_ what: String, _ body: @escaping () throws -> T) -> Pending<T> {
        let p = Pending<T>(what, world: self)
        let body = UncheckedSendable(body)  // runs once, on the MPI queue
        queue.async { p.finish(Result { try body.value() }) }
        return p
    }

    /// Runs `body` on the MPI queue and waits for it (with the time limit).
    func run<T>(_ what: String, _ body: @escaping () throws -> T) throws -> T { try start(what, body).wait() }

    /// Throws a `.ranks` error naming the call when MPI returned an error.
    func check(_ rc: Int32, _ call: String) throws {
        guard rc != MPI_SUCCESS else { return }
        var text = [CChar](repeating: 0, count: Int(updraft_mpi_max_error_string()) + 1)
        var length: Int32 = 0
        MPI_Error_string(rc, &text, &length)
        throw UpdraftError(.ranks, "\(name): \(call) failed: \(String(cString: text)) (a rank died or the network failed)",
                           hint: "see the other ranks' errors")
    }

    // MARK: Collectives (call on the MPI queue)

    /// Every rank's `values` (the same count on each), rank by rank.
    func allgather(_ values: [Double]) throws -> [[Double]] {
        let n = values.count
        var out = [Double](repeating: 0, count: n * size)
        let rc = values.withUnsafeBufferPointer { src in
            out.withUnsafeMutableBufferPointer { dst in
                MPI_Allgather(src.baseAddress, Int32(n), updraft_mpi_double(), dst.baseAddress, Int32(n), updraft_mpi_double(), comm)
            }
        }
        try check(rc, "MPI_Allgather")
        return (0..<size).map { Array(out[$0 * n..<($0 + 1) * n]) }
    }

    /// Every rank's string (UTF-8, cut at `limit` bytes), rank by rank.
    func allgather(_ text: String, limit: Int = 512) throws -> [String] {
        var bytes = Array(text.utf8.prefix(limit)).map { CChar(bitPattern: $0) }
        bytes += [CChar](repeating: 0, count: limit + 1 - bytes.count)
        var out = [CChar](repeating: 0, count: (limit + 1) * size)
        let rc = bytes.withUnsafeBufferPointer { src in
            out.withUnsafeMutableBufferPointer { dst in
                MPI_Allgather(src.baseAddress, Int32(limit + 1), updraft_mpi_char(), dst.baseAddress, Int32(limit + 1), updraft_mpi_char(), comm)
            }
        }
        try check(rc, "MPI_Allgather")
        return (0..<size).map { r in
            let part = Array(out[r * (limit + 1)..<(r + 1) * (limit + 1)])
            return String(decoding: part.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }

    /// The chunk of a `count`-value vector that each rank reduces: consecutive, sizes differing by at most one.
    func chunks(_ count: Int) -> [Range<Int>] {
        DataParallelism.ranges(DataParallelism.sliceSizes(count: count, shares: Array(repeating: 1, count: size)))
    }

    /// sum over ranks r of weights[r] * values_r, element by element, accumulated in Double in rank
    /// order (skipping zero weights) and rounded to Float once: exactly `DataParallelism.combine`'s
    /// arithmetic, so every rank gets the same bits whatever the network does. Bandwidth like a ring
    /// allreduce: each rank sends (N-1)/N of the vector twice — once to the rank that reduces each
    /// chunk (MPI_Alltoallv), once the reduced chunks to everyone (MPI_Allgatherv).
    func deterministicSum(_ values: [Float], weights: [Double]) throws -> [Float] {
        precondition(weights.count == size)
        let parts = chunks(values.count)
        let mine = parts[rank]
        let sendCounts = parts.map { Int32($0.count) }, sendOffsets = parts.map { Int32($0.lowerBound) }
        let recvCounts = [Int32](repeating: Int32(mine.count), count: size)
        let recvOffsets = (0..<size).map { Int32($0 * mine.count) }
        var received = [Float](repeating: 0, count: mine.count * size)
        var rc = values.withUnsafeBufferPointer { src in
            received.withUnsafeMutableBufferPointer { dst in
                MPI_Alltoallv(src.baseAddress, sendCounts, sendOffsets, updraft_mpi_float(),
                              dst.baseAddress, recvCounts, recvOffsets, updraft_mpi_float(), comm)
            }
        }
        try check(rc, "MPI_Alltoallv")
        let m = mine.count
        var sum = [Double](repeating: 0, count: m)
        received.withUnsafeBufferPointer { src in
            sum.withUnsafeMutableBufferPointer { acc in
                for (r, w) in weights.enumerated() where w != 0 {
                    let base = r * m
                    for k in 0..<m { acc[k] += w * Double(src[base + k]) }
                }
            }
        }
        let reduced = sum.map { Float($0) }
        var out = [Float](repeating: 0, count: values.count)
        rc = reduced.withUnsafeBufferPointer { src in
            out.withUnsafeMutableBufferPointer { dst in
                MPI_Allgatherv(src.baseAddress, Int32(mine.count), updraft_mpi_float(), dst.baseAddress,
                               sendCounts, sendOffsets, updraft_mpi_float(), comm)
            }
        }
        try check(rc, "MPI_Allgatherv")
        return out
    }

    /// Waits until every rank gets here (at most `timeout` seconds; nil: the world's limit).
    public func barrier(_ what: String, timeout: Double? = nil) throws {
        try start(what) { [self] in try check(MPI_Barrier(comm), "MPI_Barrier") }.wait(timeout: timeout)
    }

    /// The same value on every rank: rank 0's.
    func broadcast(_ values: [Double]) throws -> [Double] {
        var v = values
        let rc = v.withUnsafeMutableBufferPointer { MPI_Bcast($0.baseAddress, Int32($0.count), updraft_mpi_double(), 0, comm) }
        try check(rc, "MPI_Bcast")
        return v
    }

    /// Ends MPI at the end of a run that completed on every rank (not after a timeout: MPI is stuck then).
    public func finalize() {
        guard !stalled else { return }
        queue.sync { _ = MPI_Finalize() }
    }
}
