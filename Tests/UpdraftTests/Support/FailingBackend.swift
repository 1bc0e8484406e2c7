import Foundation
@testable import UpdraftCore
@testable import UpdraftBackends

/// Test-only failure injection: a `Backend` that passes every call to `inner` and fails the Nth call
/// of one op (counting from 1 over the backend's life), like a device whose kernel does not build,
/// whose memory runs out or that errors mid-training. With `deadAfterFailure` every later call fails
/// too (a lost device that no longer answers, not even to read its memory back).
final class FailingBackend: ForwardingBackend {
    typealias Op = BackendCall.Kind

    private let label: String
    override var name: String { label }
    /// The op that fails, and on which of its calls.
    var failOp: Op?
    var failOn = 0
    var error: Error
    var deadAfterFailure: Bool
    private(set) var calls: [Op: Int] = [:]
    private(set) var failures = 0
    private var dead = false

    /// - Parameters:
    ///   - error: what the failing call throws (default: an OpenCL CL_OUT_OF_RESOURCES error).
    init(_ inner: Backend, failing op: Op? = nil, onCall n: Int = 1, error: Error? = nil, deadAfterFailure: Bool = false,
         name: String? = nil) {
        self.label = name ?? "failing(\(inner.name))"
        self.failOp = op
        self.failOn = n
        self.error = error ?? OpenCLError(-5, "clEnqueueNDRangeKernel", "running an injected failure")
        self.deadAfterFailure = deadAfterFailure
        super.init(inner)
    }

    /// Counts the call and throws if it is the one to fail (or the device is dead).
    override func intercept<T>(_ call: BackendCall, _ body: () throws -> T) throws -> T {
        if dead { failures += 1; throw UpdraftError(.device, "\(name) stopped answering (injected)") }
        calls[call.kind, default: 0] += 1
        if call.kind == failOp, calls[call.kind] == failOn {
            failures += 1
            if deadAfterFailure { dead = true }
            throw error
        }
        return try body()
    }

    /// It stands for a device that can fail, not for the host CPU, whatever it wraps: training
    /// falls back from it to the host.
    override var runsOnHostCPU: Bool { false }
    /// What the backend says of its memory (the inner backend's unless set).
    var memoryOverride: BackendMemory?
    override var memory: BackendMemory { memoryOverride ?? inner.memory }
    /// Buffers of more values than this fail to allocate (CL_MEM_OBJECT_ALLOCATION_FAILURE).
    var allocationLimit: Int?
    /// Whether convolutions may write concat slices (the inner backend's answer unless set).
    var slices: Bool?
    override var writesConvolutionSlices: Bool { slices ?? inner.writesConvolutionSlices }

    override func makeBuffer(count: Int) throws -> DeviceBuffer {
        try intercept(BackendCall(.makeBuffer)) {
            if let limit = allocationLimit, count > limit {
                throw OpenCLError(-4, "clCreateBuffer", "allocating \(count) floats, above the injected limit \(limit)")
            }
            return try inner.makeBuffer(count: count)
        }
    }
}
