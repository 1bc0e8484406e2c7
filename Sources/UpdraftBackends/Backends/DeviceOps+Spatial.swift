import UpdraftCore

// The spatial ops (padding, upsample, resampling, LRN, L2 normalization, instance normalization;
// Ops/Spatial.swift), and the `Backend` methods that run them. CPU: CPUBackend+Spatial/+Resample;
// OpenCL: OpenCLBackend+Spatial/+Resample; the reference runs them through the host
// (`Backend.hostSpatialForward`, …: Backend+Spatial.swift).

public extension BackendCall.Kind {
    static let spatialForward = Self("spatialForward"), spatialBackward = Self("spatialBackward")
}

extension DeviceOps {
    /// y [g.outputShape] from x [g.inputShape].
    public struct SpatialForward: DeviceOp {
        public let g: SpatialGeometry, input: DeviceBuffer, output: DeviceBuffer
        public static var kind: BackendCall.Kind { .spatialForward }
        public var detail: String { g.op.familyName }
        public func run(on b: CPUBackend) throws { try b.spatialForward(g, input: input, output: output) }
        public func run(on b: OpenCLBackend) throws { try b.spatialForward(g, input: input, output: output) }
        public func run(on b: ReferenceBackend) throws { try b.hostSpatialForward(g, input: input, output: output) }
    }

    /// dx [g.inputShape] from x, y and dy.
    public struct SpatialBackward: DeviceOp {
        public let g: SpatialGeometry, input: DeviceBuffer, output: DeviceBuffer, outputGradient: DeviceBuffer
        public let inputGradient: DeviceBuffer
        public static var kind: BackendCall.Kind { .spatialBackward }
        public var detail: String { g.op.familyName }
        public func run(on b: CPUBackend) throws {
            try b.spatialBackward(g, input: input, output: output, outputGradient: outputGradient, inputGradient: inputGradient)
        }
        public func run(on b: OpenCLBackend) throws {
            try b.spatialBackward(g, input: input, output: output, outputGradient: outputGradient, inputGradient: inputGradient)
        }
        public func run(on b: ReferenceBackend) throws {
            try b.hostSpatialBackward(g, input: input, output: output, outputGradient: outputGradient, inputGradient: inputGradient)
        }
    }
}

/// These ops as `Backend` methods (each builds its op and `run`s it).
public extension Backend {
    func spatialForward(_ g: SpatialGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try run(DeviceOps.SpatialForward(g: g, input: input, output: output))
    }
    func spatialBackward(_ g: SpatialGeometry, input: DeviceBuffer, output: DeviceBuffer, outputGradient: DeviceBuffer,
                         inputGradient: DeviceBuffer) throws {
        try run(DeviceOps.SpatialBackward(g: g, input: input, output: output, outputGradient: outputGradient,
                                          inputGradient: inputGradient))
    }
}
