import COpenCL
import Foundation
import UpdraftCore

/// A context and one in-order command queue (with profiling) on one device, plus the programs built
/// for it. Owns its OpenCL handles and releases them in `deinit`; buffers and programs keep their
/// context alive. Shared by threads: OpenCL's calls are thread-safe, and the context's own state
/// (programs, statistics, live buffers) is behind locks; its settings are set before first use.
public final class OpenCLContext: @unchecked Sendable {
    /// The device the context and its queue were created on.
    public let device: OpenCLDevice
    let context: cl_context
    let queue: cl_command_queue
    /// Built programs, and those being built (another thread waits for those); guarded by
    /// `programsLock` (tasks on other threads share a context). A build runs outside the lock, so
    /// different programs build at the same time (`buildPrograms`).
    private var programs: [ProgramKey: OpenCLProgram] = [:]
    private var building: [ProgramKey: ProgramBuild] = [:]
    private let programsLock = NSLock()
    /// Options passed to every program build, before the defines.
    public var baseBuildOptions = "-cl-std=CL1.2"
    /// Where built programs are kept between processes (`ProgramBinaryCache.standard()` unless set;
    /// nil: every program is built from source). Set it before the first program is asked for.
    public var binaryCache: ProgramBinaryCache? = ProgramBinaryCache.standard()
    /// Where the context's one-line warnings go (a cached binary that could not be used or stored):
    /// standard error unless set.
    public var warn: @Sendable (String) -> Void = { FileHandleStandardError.write("warning: \($0)\n") }
    /// How this context's programs came to be, and what that cost (read it for set-up times).
    public var programStatistics: ProgramStatistics { programsLock.lock(); defer { programsLock.unlock() }; return statistics }
    private var statistics = ProgramStatistics()
    private var warnedStoring = false

    private struct ProgramKey: Hashable { var source: String; var defines: [String] }

    /// Buffers of this context alive now (made and not yet released): what a finished task must
    /// give back, and what tests check it did.
    public var liveBufferCount: Int { liveBuffers.withLock { $0 } }
    private let liveBuffers = NSLockedCounter()
    func bufferCreated() { liveBuffers.withLock { $0 += 1 } }
    func bufferReleased() { liveBuffers.withLock { $0 -= 1 } }

    /// Creates the context and an in-order queue with profiling enabled; throws `OpenCLError` when either cannot be made.
    public init(device: OpenCLDevice) throws {
        self.device = device
        var status: cl_int = 0
        var id: cl_device_id? = device.id
        guard let ctx = clCreateContext(nil, 1, &id, nil, nil, &status), status == CL_SUCCESS else {
            throw OpenCLError(status, "clCreateContext", "opening \(device.info.name)")
        }
        context = ctx
        let props = cl_command_queue_properties(CL_QUEUE_PROFILING_ENABLE)
        guard let q = clCreateCommandQueue(ctx, device.id, props, &status), status == CL_SUCCESS else {
            clReleaseContext(ctx)
            throw OpenCLError(status, "clCreateCommandQueue", "opening \(device.info.name)")
        }
        queue = q
    }

    deinit {
        programs.removeAll()
        clReleaseCommandQueue(queue)
        clReleaseContext(context)
    }

    // MARK: Programs

    /// Builds (once per source and defines) the embedded kernel file `name` (e.g. "gemm.cl"), with
    /// `#include "x.h"` lines resolved from the embedded Kernels/ folder.
    public func program(named name: String, defines: [String: String] = [:]) throws -> OpenCLProgram {
        guard let text = EmbeddedKernels.sources[name] else {
            throw UpdraftError(.unsupported, "no embedded OpenCL source named \(name)",
                               hint: "kernels are embedded from Kernels/ at build time; rebuild Updraft")
        }
        return try program(source: text, named: name, defines: defines)
    }

    /// Builds (once per source text and defines) a program from OpenCL C source. A thread asking for
    /// a program another thread is building waits for that build instead of starting its own.
    public func program(source: String, named name: String = "program", defines: [String: String] = [:]) throws -> OpenCLProgram {
        try makeProgram(source: source, named: name, defines: defines).program
    }

    /// `program(source:named:defines:)`, and whether this call made it (false: it was built, or another
    /// thread built it while this one waited).
    private func makeProgram(source: String, named name: String, defines: [String: String]) throws -> (program: OpenCLProgram, made: Bool) {
        let defineList = defines.sorted { $0.key < $1.key }.map { "-D\($0.key)=\($0.value)" }
        let key = ProgramKey(source: source, defines: defineList)
        programsLock.lock()
        if let p = programs[key] { programsLock.unlock(); return (p, false) }
        if let pending = building[key] { programsLock.unlock(); return (try pending.wait(), false) }
        let build = ProgramBuild()
        building[key] = build
        programsLock.unlock()
        let start = DispatchTime.now().uptimeNanoseconds
        let result = Result {
            try loadOrBuild(try Self.resolveIncludes(source, file: name), name: name,
                            options: ([baseBuildOptions] + defineList).joined(separator: " "))
        }
        programsLock.lock()
        building[key] = nil
        if case let .success(p) = result { programs[key] = p }
        statistics.seconds += Double(DispatchTime.now().uptimeNanoseconds &- start) * 1e-9
        programsLock.unlock()
        build.finish(result)
        return (try result.get(), true)
    }

    /// Builds the embedded programs `requests` (file, defines) that are not built yet, several at once
    /// (OpenCL builds are thread-safe; drivers compile them on the host's cores), and returns how many
    /// it built or loaded. The first failure is thrown after every build has ended; a program that
    /// failed is not kept, so its first launch builds it again and reports the error there.
    public func buildPrograms(_ requests: [(file: String, defines: [String: String])]) throws -> Int {
        guard !requests.isEmpty else { return 0 }
        let outcome = BuildOutcome()
        // A request named twice, or built already, is not made again: `makeProgram` waits for or returns it.
        DispatchQueue.concurrentPerform(iterations: requests.count) { i in
            do {
                guard let text = EmbeddedKernels.sources[requests[i].file] else { _ = try program(named: requests[i].file); return }
                if try makeProgram(source: text, named: requests[i].file, defines: requests[i].defines).made { outcome.countMade() }
            } catch { outcome.keep(error) }
        }
        if let error = outcome.error { throw error }
        return outcome.made
    }

    /// The program from the binary cache when it holds a usable one, else built from source (and
    /// its binary stored). A cached binary the driver refuses is removed with one warning.
    private func loadOrBuild(_ source: String, name: String, options: String) throws -> OpenCLProgram {
        guard let cache = binaryCache else {
            record { $0.builtFromSource += 1 }
            return try OpenCLProgram(context: self, source: source, name: name, options: options)
        }
        let cacheKey = ProgramBinaryCache.Key(device: device.info, source: source, options: options)
        switch cache.load(cacheKey) {
        case let .hit(binary):
            do {
                let p = try OpenCLProgram(context: self, binary: binary, name: name, options: options)
                record { $0.loadedFromBinary += 1 }
                return p
            } catch {
                cache.remove(cacheKey)
                record { $0.rejectedBinaries += 1 }
                warn("the cached binary of \(name) for \(device.info.name) was refused (\(firstLine(of: error))); "
                     + "rebuilt from source and cached again")
            }
        case let .corrupt(reason):
            record { $0.rejectedBinaries += 1 }
            warn("the cached binary of \(name) for \(device.info.name) was unusable (\(reason)); rebuilt from source and cached again")
        case .miss:
            break
        }
        let p = try OpenCLProgram(context: self, source: source, name: name, options: options)
        record { $0.builtFromSource += 1 }
        if let binary = p.binary() {
            do { try cache.store(binary, for: cacheKey) } catch where firstStoreFailure() {
                warn("built programs are not cached: \(firstLine(of: error))")
            } catch {}
        }
        return p
    }

    /// Counts into `statistics` (builds run on several threads at once).
    private func record(_ change: (inout ProgramStatistics) -> Void) {
        programsLock.lock(); change(&statistics); programsLock.unlock()
    }

    /// True the first time a binary could not be stored (one warning per context).
    private func firstStoreFailure() -> Bool {
        programsLock.lock(); defer { programsLock.unlock() }
        defer { warnedStoring = true }
        return !warnedStoring
    }

    /// Replaces `#include "x"` with the embedded file x (each file at most once).
    static func resolveIncludes(_ source: String, file: String, seen: Set<String> = []) throws -> String {
        var seen = seen
        var out: [Substring] = []
        for line in source.split(separator: "\n", omittingEmptySubsequences: false) {
            let t = line.trimmingCharacters(in: .whitespaces)
            guard t.hasPrefix("#include"), let q1 = t.firstIndex(of: "\""), let q2 = t.lastIndex(of: "\""), q1 < q2 else {
                out.append(line); continue
            }
            let name = String(t[t.index(after: q1)..<q2])
            guard let included = EmbeddedKernels.sources[name] else {
                throw UpdraftError(.unsupported, "\(file) includes \"\(name)\", which is not in Kernels/")
            }
            if seen.contains(name) { continue }
            seen.insert(name)
            out.append(Substring(try resolveIncludes(included, file: name, seen: seen)))
        }
        return out.joined(separator: "\n")
    }

    // MARK: Memory

    /// A device buffer of `count` floats, contents undefined; throws for a negative count or more than the device's largest allocation.
    public func makeBuffer(count: Int) throws -> OpenCLBuffer { try OpenCLBuffer(context: self, count: count) }

    /// A device buffer filled with `values` by a blocking write (so it waits for queued work).
    public func makeBuffer(_ values: [Float]) throws -> OpenCLBuffer {
        let b = try makeBuffer(count: values.count)
        try write(values, to: b)
        return b
    }

    /// A buffer holding `values` as 32-bit ints (for kernels that take `__global const int*`), filled
    /// when created rather than through the queue, so making it never waits for queued kernels.
    public func makeIntBuffer(_ values: [Int32]) throws -> OpenCLBuffer {
        try values.withUnsafeBytes { raw in try OpenCLBuffer(context: self, count: values.count, initial: raw.baseAddress) }
    }

    /// Blocking write of `values` at element `offset`; waits for everything queued before it. Throws `.invalidArgument` when the range does not fit.
    public func write(_ values: [Float], to buffer: OpenCLBuffer, offset: Int = 0) throws {
        guard offset >= 0, offset + values.count <= buffer.count else {
            throw UpdraftError(.invalidArgument, "writing \(values.count) floats at \(offset) into a buffer of \(buffer.count)")
        }
        if values.isEmpty { return }
        try values.withUnsafeBytes { raw in
            try clCheck(clEnqueueWriteBuffer(queue, buffer.mem, cl_bool(CL_TRUE), offset * 4, raw.count, raw.baseAddress,
                                             0, nil, nil), "clEnqueueWriteBuffer", "uploading \(values.count) floats")
        }
    }

    /// Blocking read of `count` floats (default: to the end) from element `offset`; waits for queued work. Throws `.invalidArgument` when the range does not fit.
    public func read(_ buffer: OpenCLBuffer, count: Int? = nil, offset: Int = 0) throws -> [Float] {
        let n = count ?? (buffer.count - offset)
        guard offset >= 0, n >= 0, offset + n <= buffer.count else {
            throw UpdraftError(.invalidArgument, "reading \(n) floats at \(offset) from a buffer of \(buffer.count)")
        }
        var out = [Float](repeating: 0, count: n)
        if n == 0 { return out }
        try out.withUnsafeMutableBytes { raw in
            try clCheck(clEnqueueReadBuffer(queue, buffer.mem, cl_bool(CL_TRUE), offset * 4, raw.count, raw.baseAddress,
                                            0, nil, nil), "clEnqueueReadBuffer", "downloading \(n) floats")
        }
        return out
    }

    /// Enqueues a read of the whole buffer without waiting; the closure waits for it and returns
    /// the values. The host memory stays allocated until the read has finished, even if the closure
    /// is never called (it is released once the command completes).
    public func readLater(_ buffer: OpenCLBuffer) throws -> () throws -> [Float] {
        let target = PendingRead(count: buffer.count)
        if buffer.count == 0 { return { [] } }
        var event: cl_event? = nil
        try clCheck(clEnqueueReadBuffer(queue, buffer.mem, cl_bool(CL_FALSE), 0, buffer.count * 4, target.pointer,
                                        0, nil, &event), "clEnqueueReadBuffer", "downloading \(buffer.count) floats")
        guard let event else { throw OpenCLError(CL_INVALID_EVENT, "clEnqueueReadBuffer", "no event for a read") }
        target.event = OpenCLEvent(event)
        try flush()
        return {
            try target.event?.wait()
            return Array(UnsafeBufferPointer(start: target.pointer, count: target.count))
        }
    }

    /// Queues a fill of the first `count` values (default: all) with `value`; returns without waiting.
    public func fill(_ buffer: OpenCLBuffer, with value: Float, count: Int? = nil) throws {
        let n = count ?? buffer.count
        if n == 0 { return }
        var v = value
        try clCheck(clEnqueueFillBuffer(queue, buffer.mem, &v, 4, 0, n * 4, 0, nil, nil), "clEnqueueFillBuffer")
    }

    /// Queues a device-side copy of `count` floats (default: all of `source`) between the given element offsets; returns without waiting. Throws `.invalidArgument` when a range does not fit.
    public func copy(_ source: OpenCLBuffer, to destination: OpenCLBuffer, count: Int? = nil,
                     sourceOffset: Int = 0, destinationOffset: Int = 0) throws {
        let n = count ?? source.count
        guard sourceOffset + n <= source.count, destinationOffset + n <= destination.count else {
            throw UpdraftError(.invalidArgument, "copying \(n) floats between buffers of \(source.count) and \(destination.count)")
        }
        if n == 0 { return }
        try clCheck(clEnqueueCopyBuffer(queue, source.mem, destination.mem, sourceOffset * 4, destinationOffset * 4,
                                        n * 4, 0, nil, nil), "clEnqueueCopyBuffer")
    }

    /// Waits until every queued command has finished.
    public func finish() throws { try clCheck(clFinish(queue), "clFinish") }
    /// Submits queued commands without waiting.
    public func flush() throws { try clCheck(clFlush(queue), "clFlush") }
}

/// How a context's programs came to be: built from source, loaded from the binary cache, or
/// rebuilt because a cached binary could not be used; and the seconds all of it took.
public struct ProgramStatistics: Hashable, Sendable {
    /// Programs compiled from OpenCL C source.
    public var builtFromSource = 0
    /// Programs loaded from `ProgramBinaryCache`.
    public var loadedFromBinary = 0
    /// Cached binaries that were corrupt or refused by the driver (each then built from source).
    public var rejectedBinaries = 0
    /// Seconds spent making programs (loading, building, caching), summed over the programs: builds
    /// that ran at the same time (`buildPrograms`) each count their own.
    public var seconds = 0.0
    /// Programs made, whichever way.
    public var programs: Int { builtFromSource + loadedFromBinary }
}

/// Host memory a non-blocking read writes into: freed only after the read has finished.
final class PendingRead {
    let count: Int
    let pointer: UnsafeMutablePointer<Float>
    var event: OpenCLEvent?
    init(count: Int) {
        self.count = count
        pointer = .allocate(capacity: max(1, count))
    }
    deinit {
        try? event?.wait()
        pointer.deallocate()
    }
}

/// Device memory for `count` float32 values. Released when the last reference goes.
public final class OpenCLBuffer: DeviceBuffer {
    /// Number of float32 values (the allocation is at least one float, for empty buffers).
    public let count: Int
    let mem: cl_mem
    /// Keeps the context (and its queue) alive while the buffer lives.
    public let context: OpenCLContext

    /// - Parameter initial: when given, `count` * 4 bytes the buffer starts with (copied at creation,
    ///   outside the queue: nothing waits for queued work, and the memory may be reused on return).
    init(context: OpenCLContext, count: Int, initial: UnsafeRawPointer? = nil) throws {
        guard count >= 0 else { throw UpdraftError(.invalidArgument, "buffer size \(count) is negative") }
        let bytes = max(1, count) * 4
        guard UInt64(bytes) <= context.device.info.maxAllocation else {
            throw OpenCLError(CL_MEM_OBJECT_ALLOCATION_FAILURE, "clCreateBuffer",
                              "allocating \(bytes) bytes, above the device's largest allocation \(context.device.info.maxAllocation)")
        }
        let copying = initial != nil && count > 0
        let flags = cl_mem_flags(CL_MEM_READ_WRITE) | (copying ? cl_mem_flags(CL_MEM_COPY_HOST_PTR) : 0)
        var status: cl_int = 0
        guard let m = clCreateBuffer(context.context, flags, bytes, copying ? UnsafeMutableRawPointer(mutating: initial) : nil,
                                     &status),
              status == CL_SUCCESS else {
            throw OpenCLError(status, "clCreateBuffer", "allocating \(bytes) bytes on \(context.device.info.name)")
        }
        self.count = count
        self.mem = m
        self.context = context
        context.bufferCreated()
    }

    deinit {
        clReleaseMemObject(mem)
        context.bufferReleased()
    }
}

/// An integer behind a lock (the live-buffer count, changed from any thread).
final class NSLockedCounter {
    private let lock = NSLock()
    private var value = 0
    func withLock<T>(_ body: (inout Int) -> T) -> T { lock.lock(); defer { lock.unlock() }; return body(&value) }
}

/// What builds running at once made, and their first error (`OpenCLContext.buildPrograms`).
private final class BuildOutcome: @unchecked Sendable {
    private let lock = NSLock()
    private(set) var error: Error?
    private(set) var made = 0
    func keep(_ error: Error) { lock.lock(); if self.error == nil { self.error = error }; lock.unlock() }
    func countMade() { lock.lock(); made += 1; lock.unlock() }
}

/// A program build in progress on one thread that others wait for (`OpenCLContext.program`).
private final class ProgramBuild: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var result: Result<OpenCLProgram, Error>?

    func finish(_ result: Result<OpenCLProgram, Error>) {
        self.result = result
        done.signal()
    }

    func wait() throws -> OpenCLProgram {
        done.wait()
        done.signal()  // the next waiter passes too
        return try result!.get()
    }
}
