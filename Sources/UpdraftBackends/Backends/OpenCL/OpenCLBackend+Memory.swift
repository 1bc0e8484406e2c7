// Where an OpenCL device's buffers live, for the feature cache's budgets.
extension OpenCLBackend {
    /// A CPU device (PoCL) allocates its buffers in host memory; any other device has its own.
    public var memory: BackendMemory {
        device.type == .cpu ? .host : .device(bytes: device.globalMemory, largestBuffer: device.maxAllocation)
    }
}
