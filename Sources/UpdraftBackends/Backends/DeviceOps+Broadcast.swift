import UpdraftCore

// Broadcasting arithmetic and reductions (Ops/Broadcast.swift, Ops/Reduce.swift), and the `Backend`
// methods that run them. CPU: CPUBackend+Broadcast/+Reduce; OpenCL: the OpenCLBackend+ files of the
// same names; the reference runs them through the host (Backend+Broadcast.swift).

public extension BackendCall.Kind {
    static let broadcastBinary = Self("broadcastBinary"), reduce = Self("reduce"), reduceBackward = Self("reduceBackward")
}

extension DeviceOps {
    /// y = a op b with numpy broadcasting.
    public struct BroadcastBinary: DeviceOp {
        public let g: BroadcastGeometry, a: DeviceBuffer, b: DeviceBuffer, output: DeviceBuffer
        public static var kind: BackendCall.Kind { .broadcastBinary }
        public var detail: String { g.op.rawValue }
        public func run(on backend: CPUBackend) throws { try backend.broadcastBinary(g, a, b, output: output) }
        public func run(on backend: OpenCLBackend) throws { try backend.broadcastBinary(g, a, b, output: output) }
        public func run(on backend: ReferenceBackend) throws { try backend.hostBroadcastBinary(g, a, b, output: output) }
    }

    /// y = the reduction `g.kind` of x over the reduced axes (times `g.scale`).
    public struct Reduce: DeviceOp {
        public let g: ReductionGeometry, input: DeviceBuffer, output: DeviceBuffer
        public static var kind: BackendCall.Kind { .reduce }
        public var detail: String { "\(g.kind)" }
        public func run(on b: CPUBackend) throws { try b.reduce(g, input: input, output: output) }
        public func run(on b: OpenCLBackend) throws { try b.reduce(g, input: input, output: output) }
        public func run(on b: ReferenceBackend) throws { try b.hostReduce(g, input: input, output: output) }
    }

    /// dx of `Reduce` from x and dy.
    public struct ReduceBackward: DeviceOp {
        public let g: ReductionGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer, inputGradient: DeviceBuffer
        public static var kind: BackendCall.Kind { .reduceBackward }
        public var detail: String { "\(g.kind)" }
        public func run(on b: CPUBackend) throws {
            try b.reduceBackward(g, input: input, outputGradient: outputGradient, inputGradient: inputGradient)
        }
        public func run(on b: OpenCLBackend) throws {
            try b.reduceBackward(g, input: input, outputGradient: outputGradient, inputGradient: inputGradient)
        }
        public func run(on b: ReferenceBackend) throws {
            try b.hostReduceBackward(g, input: input, outputGradient: outputGradient, inputGradient: inputGradient)
        }
    }
}

/// These ops as `Backend` methods (each builds its op and `run`s it).
public extension Backend {
    func broadcastBinary(_ g: BroadcastGeometry, _ a: DeviceBuffer, _ b: DeviceBuffer, output: DeviceBuffer) throws {
        try run(DeviceOps.BroadcastBinary(g: g, a: a, b: b, output: output))
    }
    func reduce(_ g: ReductionGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try run(DeviceOps.Reduce(g: g, input: input, output: output))
    }
    func reduceBackward(_ g: ReductionGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                        inputGradient: DeviceBuffer) throws {
        try run(DeviceOps.ReduceBackward(g: g, input: input, outputGradient: outputGradient, inputGradient: inputGradient))
    }
}
