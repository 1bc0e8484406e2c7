import Foundation
import UpdraftCore
import UpdraftBackends

/// Short measurements of a device's speed for the scheduler: multiply-add rate, memory bandwidth,
/// launch latency and, for OpenCL devices, host transfer bandwidth. Each measurement grows its
/// problem until it takes a few milliseconds, then keeps the best of a few runs, so a whole device
/// calibrates in well under a second plus the kernel build. Results are cached (`CalibrationCache`).
public enum DeviceCalibration {
    /// Fraction of the measured multiply-add peak that Updraft's OpenCL convolution and matrix
    /// kernels are assumed to reach (hand-written OpenCL GEMMs reach roughly a third to a half).
    public static let openCLMatrixEfficiency = 0.4

    /// How long one timed run should last before it counts, seconds.
    static let targetSeconds = 0.005

    // MARK: OpenCL devices

    /// The cache key of an OpenCL device.
    public static func cacheKey(_ info: OpenCLDeviceInfo) -> String {
        CalibrationCache.key(kind: "opencl", name: "\(info.platformName): \(info.name)", driverVersion: info.driverVersion)
    }

    /// The device's profile, from the cache or measured with Kernels/calibrate.cl.
    public static func profile(of device: OpenCLDevice, cache: CalibrationCache?) throws -> CalibrationCache.Outcome {
        var outcome: CalibrationCache.Outcome
        if let cache {
            outcome = try cache.profile(key: cacheKey(device.info)) { try measure(device) }
        } else {
            outcome = CalibrationCache.Outcome(profile: try measure(device), cached: false, warning: nil)
        }
        // The index is where the device is now; the cache only keeps the speed.
        outcome.profile.openCLIndex = device.info.index
        outcome.profile.name = device.info.name
        return outcome
    }

    /// Measures an OpenCL device with the kernels of Kernels/calibrate.cl.
    public static func measure(_ device: OpenCLDevice) throws -> DeviceProfile {
        let info = device.info
        let ctx = try OpenCLContext(device: device)
        let program = try ctx.program(named: "calibrate.cl")
        let gflops = try measureFMA(ctx, program)
        let (bandwidth, transfer, transferLatency) = try measureMemory(ctx, program)
        let latency = try measureLaunchLatency(ctx, program)
        let setup = try measureSetup(device)
        return DeviceProfile(name: info.name, kind: DeviceProfile.Kind(info.type), openCLIndex: info.index,
                             fmaGFLOPS: gflops, bandwidthGBps: bandwidth, launchLatencyMicroseconds: latency * 1e6,
                             memoryBytes: info.globalMemory, transferGBps: transfer,
                             transferLatencyMicroseconds: transferLatency * 1e6, matrixEfficiency: openCLMatrixEfficiency,
                             driverVersion: info.driverVersion, contextSeconds: setup.context,
                             programBuildSeconds: setup.build, programLoadSeconds: setup.load)
    }

    /// What a job pays on the device before its first batch: a context and queue, and one of the
    /// backend's programs (the activation kernels) made and launched once: built from source with an
    /// option no earlier build used (so neither Updraft's binary cache nor the driver's own cache
    /// holds it), then in a second context from the binary the first build left in a scratch cache.
    static func measureSetup(_ device: OpenCLDevice) throws -> (context: Double, build: Double, load: Double) {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-calibration-\(getpid())-\(UInt32.random(in: 0...UInt32.max))")
        defer { try? FileManager.default.removeItem(at: folder) }
        let scratch = ProgramBinaryCache(directory: folder)
        let nonce = "-DUPDRAFT_CALIBRATION=\(UInt64.random(in: 1...UInt64.max))"
        func setUp() throws -> (context: Double, program: Double) {
            var made: OpenCLContext?
            let context = try wallSeconds { made = try OpenCLContext(device: device) }
            guard let ctx = made else { throw UpdraftError(.device, "no context on \(device.info.name)") }
            ctx.binaryCache = scratch
            ctx.baseBuildOptions += " " + nonce
            ctx.warn = { _ in }
            let backend = OpenCLBackend(context: ctx, tuning: OpenCLTuning.forDevice(device.info))
            let x = try backend.makeBuffer([Float](repeating: -1, count: 256)), y = try backend.makeBuffer(count: 256)
            let program = try wallSeconds {
                try backend.activationForward(.relu, input: x, output: y, count: 256)
                try backend.synchronize()
            }
            return (context, program)
        }
        let cold = try setUp()
        let warm = try setUp()
        return (min(cold.context, warm.context), cold.program, min(warm.program, cold.program))
    }

    /// GFLOP/s of `calibrate_fma`: enough work-items to fill every compute unit, rounds grown by 4x.
    static func measureFMA(_ ctx: OpenCLContext, _ program: OpenCLProgram) throws -> Double {
        let fma = try program.kernel("calibrate_fma")
        let items = max(4096, ctx.device.info.computeUnits * 2048)
        let out = try ctx.makeBuffer(count: items)
        func run(_ rounds: Int) throws -> Double {
            try fma.setArguments([.buffer(out), .float(0.999), .float(0.001), .int(rounds)])
            return try fma.launch(global: [items], profile: true)?.elapsedSeconds() ?? 0
        }
        _ = try run(1)  // the first launch may include compiling for the work-group size
        var rounds = 16
        while try run(rounds) < targetSeconds, rounds < 1 << 20 { rounds *= 4 }
        let seconds = try bestOf(3) { try run(rounds) }
        return Double(items) * Double(rounds) * 64 / seconds / 1e9
    }

    /// Device copy bandwidth (`calibrate_copy`, grown until it takes the target time or moves
    /// 64 MiB) and host transfer bandwidth (blocking writes and reads, on the host clock), GB/s, and
    /// the seconds of one blocking one-value copy.
    static func measureMemory(_ ctx: OpenCLContext, _ program: OpenCLProgram)
        throws -> (device: Double, transfer: Double, latency: Double) {
        let copy = try program.kernel("calibrate_copy")
        let largest = max(1 << 14, min(1 << 22, Int(min(ctx.device.info.maxAllocation, UInt64(Int.max)) / 16)))
        let source = try ctx.makeBuffer(count: largest * 4), destination = try ctx.makeBuffer(count: largest * 4)
        func run(_ n: Int) throws -> Double {
            try copy.setArguments([.buffer(source), .buffer(destination), .int(n)])
            return try copy.launch(global: [n], profile: true)?.elapsedSeconds() ?? 0
        }
        var float4s = min(1 << 16, largest)
        _ = try run(float4s)
        while try run(float4s) < targetSeconds, float4s < largest { float4s = min(largest, float4s * 4) }
        let copySeconds = try bestOf(3) { try run(float4s) }

        let floats = min(largest * 4, 1 << 22)
        let host = [Float](repeating: 1, count: floats)
        try ctx.write(host, to: source)
        let transferSeconds = try bestOf(3) {
            try wallSeconds {
                try ctx.write(host, to: source)
                _ = try ctx.read(source, count: floats)
            }
        }
        let copies = 20
        let latency = try bestOf(3) {
            try wallSeconds {
                for _ in 0..<copies / 2 {
                    try ctx.write([1], to: source)
                    _ = try ctx.read(source, count: 1)
                }
            } / Double(copies)
        }
        return (Double(float4s) * 32 / copySeconds / 1e9, Double(floats) * 8 / transferSeconds / 1e9, latency)
    }

    /// Seconds per launch of `calibrate_empty`, launched back to back and waited for once.
    static func measureLaunchLatency(_ ctx: OpenCLContext, _ program: OpenCLProgram) throws -> Double {
        let empty = try program.kernel("calibrate_empty")
        let out = try ctx.makeBuffer(count: 1)
        try empty.setArguments([.buffer(out)])
        for _ in 0..<5 { try empty.launch(global: [1]) }
        try ctx.finish()
        let launches = 100
        return try bestOf(3) {
            try wallSeconds {
                for _ in 0..<launches { try empty.launch(global: [1]) }
                try ctx.finish()
            } / Double(launches)
        }
    }

    // MARK: The host CPU

    /// The cache key of the host CPU with a given host backend (a new backend is measured afresh).
    public static func hostCacheKey(_ host: HostInfo, backendName: String) -> String {
        CalibrationCache.key(kind: "host", name: host.cpuName, driverVersion: hostDriverVersion(host, backendName: backendName))
    }

    /// The host CPU's profile, from the cache or measured by timing the host backend's own ops.
    public static func hostProfile(_ host: HostInfo = .current, backend: Backend = Scheduler.makeHostBackend(),
                                   cache: CalibrationCache?) throws -> CalibrationCache.Outcome {
        let measure = { try measureHost(host, backend: backend) }
        var outcome = try cache.map { try $0.profile(key: hostCacheKey(host, backendName: backend.name), measure: measure) }
            ?? CalibrationCache.Outcome(profile: try measure(), cached: false, warning: nil)
        outcome.profile.openCLIndex = nil
        outcome.profile.name = host.cpuName
        return outcome
    }

    /// What a host measurement depends on besides the CPU: the backend, the cores, and whether this
    /// is a debug build (whose loops are many times slower than a release build's).
    static func hostDriverVersion(_ host: HostInfo, backendName: String) -> String {
        #if DEBUG
        let build = "debug build"
        #else
        let build = "release build"
        #endif
        return "backend \(backendName), \(host.cores) cores, \(build)"
    }

    /// Times the backend's convolution (its real matrix rate, so efficiency 1), its ReLU (memory
    /// bandwidth) and a one-element op (the per-call overhead).
    public static func measureHost(_ host: HostInfo, backend: Backend) throws -> DeviceProfile {
        // Convolution 3x3, 32 -> 32 channels, on a growing square image.
        var side = 8
        func convolution(_ s: Int) throws -> (seconds: Double, flops: Double) {
            let g = try ConvolutionSpec(inputChannels: 32, outputChannels: 32, kernelH: 3, kernelW: 3,
                                        padding: .valid(top: 1, bottom: 1, left: 1, right: 1))
                .geometry(input: [1, 32, s, s])
            let x = try backend.makeBuffer([Float](repeating: 0.5, count: g.inputShape.count))
            let w = try backend.makeBuffer([Float](repeating: 0.01, count: g.weightShape.count))
            let b = try backend.makeBuffer([Float](repeating: 0, count: g.outChannels))
            let y = try backend.makeBuffer(count: g.outputShape.count)
            let seconds = try bestOf(2) {
                try wallSeconds {
                    try backend.convolutionForward(g, input: x, weights: w, bias: b, output: y, fusedReLU: false)
                    try backend.synchronize()
                }
            }
            return (seconds, g.forwardCost.flops)
        }
        var conv = try convolution(side)
        while conv.seconds < 4 * targetSeconds, side < 128 { side *= 2; conv = try convolution(side) }

        // ReLU over a growing vector: 8 bytes per element.
        var count = 1 << 14
        func relu(_ n: Int) throws -> Double {
            let x = try backend.makeBuffer([Float](repeating: -1, count: n)), y = try backend.makeBuffer(count: n)
            return try bestOf(2) {
                try wallSeconds {
                    try backend.activationForward(.relu, input: x, output: y, count: n)
                    try backend.synchronize()
                }
            }
        }
        var reluSeconds = try relu(count)
        while reluSeconds < targetSeconds, count < 1 << 24 { count *= 4; reluSeconds = try relu(count) }

        // Per-call overhead: a one-element op, many times.
        let one = try backend.makeBuffer([1]), result = try backend.makeBuffer(count: 1)
        let calls = 200
        let overhead = try bestOf(3) {
            try wallSeconds {
                for _ in 0..<calls { try backend.activationForward(.relu, input: one, output: result, count: 1) }
                try backend.synchronize()
            } / Double(calls)
        }
        let bandwidth = Double(count) * 8 / reluSeconds / 1e9
        return DeviceProfile(name: host.cpuName, kind: .cpu, openCLIndex: nil,
                             fmaGFLOPS: conv.flops / conv.seconds / 1e9, bandwidthGBps: bandwidth,
                             launchLatencyMicroseconds: overhead * 1e6, memoryBytes: host.memoryBytes,
                             transferGBps: bandwidth, matrixEfficiency: 1,
                             driverVersion: hostDriverVersion(host, backendName: backend.name))
    }

    // MARK: Timing helpers

    /// Wall-clock seconds of `body`, never zero.
    static func wallSeconds(_ body: () throws -> Void) throws -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        try body()
        let end = DispatchTime.now().uptimeNanoseconds
        return max(Double(end &- start) * 1e-9, 1e-9)
    }

    /// The smallest of `runs` timings (the least disturbed run), never zero.
    static func bestOf(_ runs: Int, _ time: () throws -> Double) throws -> Double {
        var best = Double.infinity
        for _ in 0..<max(1, runs) { best = min(best, try time()) }
        return max(best, 1e-9)
    }
}
