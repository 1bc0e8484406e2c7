// Helpers shared by the element-wise, pooling, softmax, concat and optimizer ops: argument checks that
// turn a wrong buffer or size into an `UpdraftError` (a kernel must never read past a buffer), the
// `-D` defines every Updraft kernel file is built with, and 1-D / per-group launches.
import UpdraftCore

extension OpenCLBackend {
    /// Work-group size of the reduction kernels: the tuned size rounded down to a power of two
    /// (their tree reductions halve it), passed as `-D WG_SIZE`.
    var reductionGroupSize: Int {
        var size = 1
        while size * 2 <= tuning.workGroupSize { size *= 2 }
        return size
    }

    /// The kernel `name` of the embedded file `file`, built with this backend's tuning defines.
    func opsKernel(_ file: String, _ name: String) throws -> OpenCLKernel {
        try kernel(file, name, defines: opsDefines)
    }

    /// The OpenCL buffer behind `buffer`, checked to hold at least `count` floats.
    func operand(_ buffer: DeviceBuffer, holds count: Int, _ what: @autoclosure () -> String) throws -> OpenCLBuffer {
        let b = try cl(buffer)
        guard b.count >= count else {
            throw UpdraftError(.invalidArgument, "\(name): \(what()) holds \(b.count) floats, the op needs \(count)",
                               hint: "check the shapes passed with the geometry")
        }
        return b
    }

    /// Throws unless every size is at least 0 (or 1 where `positive`) and `total` elements can be
    /// indexed with a 32-bit int, as the kernels do.
    func requireSizes(_ sizes: [(String, Int)], positive: Bool = false, total: Int, op: String) throws {
        for (what, value) in sizes where value < (positive ? 1 : 0) {
            throw UpdraftError(.invalidArgument, "\(name) \(op): \(what) is \(value), must be at least \(positive ? 1 : 0)")
        }
        guard total <= Int(Int32.max) else {
            throw UpdraftError(.unsupported, "\(name) \(op): \(total) elements is more than the kernels index (2^31 - 1)",
                               hint: "use a smaller batch size")
        }
    }

    /// Launches `k` with one work-item per element of `count` (nothing for 0), in groups of the tuned size.
    func launchElementwise(_ k: OpenCLKernel, count: Int) throws {
        guard count > 0 else { return }
        let local = max(1, min(tuning.workGroupSize, k.maxWorkGroupSize))
        try k.launch(global: [count], local: [local])
    }

    /// Launches `k` (built with `reqd_work_group_size(WG_SIZE)`) as `groups` work-groups of WG_SIZE.
    func launchGroups(_ k: OpenCLKernel, groups: Int) throws {
        guard groups > 0 else { return }
        let size = reductionGroupSize
        try k.launch(global: [groups * size], local: [size])
    }
}
