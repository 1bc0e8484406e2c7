import UpdraftBackends
import UpdraftCore

/// What the scheduler knows about one place layers can run: how fast it multiplies and adds, how
/// fast it moves memory, what a kernel launch costs, how much memory it has, and how fast tensors
/// reach it from the host. Calibration measures these for real devices (`DeviceCalibration`);
/// tests describe imaginary ones (a fast GPU, a slow GPU, a CPU) with the same type.
public struct DeviceProfile: Hashable, Codable, Sendable, CustomStringConvertible {
    /// What sort of device it is: the host or an OpenCL CPU, a GPU, or another accelerator.
    public enum Kind: String, Codable, Sendable {
        /// A CPU (the host, or an OpenCL CPU device such as PoCL), a GPU, or any other accelerator.
        case cpu, gpu, accelerator

        /// The scheduler's kind for an OpenCL device type (anything unusual counts as an accelerator).
        public init(_ type: OpenCLDeviceType) {
            switch type {
            case .gpu: self = .gpu
            case .cpu: self = .cpu
            case .accelerator, .other: self = .accelerator
            }
        }
    }

    /// The device's name (the OpenCL device name, or the host CPU's model name).
    public var name: String
    /// CPU, GPU or accelerator (for an OpenCL device, from its device type).
    public var kind: Kind
    /// nil for the host CPU backend; otherwise the device's index in `OpenCLRuntime.devices()`
    /// (the `#` column of `updraft devices`). An OpenCL CPU device such as PoCL has kind `.cpu`
    /// and an index: it is an OpenCL device, not the host backend.
    public var openCLIndex: Int?
    /// Multiply-add throughput, GFLOP/s (a multiply-add counts 2).
    public var fmaGFLOPS: Double
    /// Device memory bandwidth, GB/s (bytes read plus bytes written, 1 GB = 1e9 bytes).
    public var bandwidthGBps: Double
    /// Cost of one kernel launch (or one host op call), µs.
    public var launchLatencyMicroseconds: Double
    /// Memory available to tensors, bytes.
    public var memoryBytes: UInt64
    /// Host-to-device and device-to-host copy bandwidth, GB/s. Unused for the host itself.
    public var transferGBps: Double
    /// Fixed cost of one blocking copy between host and device (a round trip), µs.
    public var transferLatencyMicroseconds: Double
    /// Fraction of `fmaGFLOPS` that convolution and matrix kernels reach: below 1 when `fmaGFLOPS`
    /// is a peak measured with a pure multiply-add loop, 1 when it was measured by timing the
    /// backend's own convolution.
    public var matrixEfficiency: Double
    /// Driver (or host backend) version the measurement belongs to.
    public var driverVersion: String
    /// Seconds to open a context and queue on the device (0 for the host).
    public var contextSeconds: Double
    /// Seconds to make one program from source with the driver's compiler, its first launch included
    /// (0 for the host): what a job pays per program the first time.
    public var programBuildSeconds: Double
    /// Seconds to make the same program from the program binary cache, first launch included.
    public var programLoadSeconds: Double

    /// A profile with the given measurements; `transferLatencyMicroseconds` defaults to the launch latency, `matrixEfficiency` to 1.
    public init(name: String, kind: Kind, openCLIndex: Int?, fmaGFLOPS: Double, bandwidthGBps: Double,
                launchLatencyMicroseconds: Double, memoryBytes: UInt64, transferGBps: Double,
                transferLatencyMicroseconds: Double? = nil, matrixEfficiency: Double = 1, driverVersion: String = "",
                contextSeconds: Double = 0, programBuildSeconds: Double = 0, programLoadSeconds: Double = 0) {
        self.name = name; self.kind = kind; self.openCLIndex = openCLIndex
        self.fmaGFLOPS = fmaGFLOPS; self.bandwidthGBps = bandwidthGBps
        self.launchLatencyMicroseconds = launchLatencyMicroseconds; self.memoryBytes = memoryBytes
        self.transferGBps = transferGBps
        self.transferLatencyMicroseconds = transferLatencyMicroseconds ?? launchLatencyMicroseconds
        self.matrixEfficiency = matrixEfficiency; self.driverVersion = driverVersion
        self.contextSeconds = contextSeconds; self.programBuildSeconds = programBuildSeconds
        self.programLoadSeconds = programLoadSeconds
    }

    /// The host CPU backend (tensors in host memory, no copies to reach it).
    public var isHost: Bool { openCLIndex == nil }

    /// A short stable identifier: "cpu" for the host backend, "opencl:N" for OpenCL device N.
    public var identifier: String { openCLIndex.map { "opencl:\($0)" } ?? "cpu" }

    /// How tables name the device: "cpu (AMD EPYC …)" or "#0 NVIDIA A100 (gpu)".
    public var label: String {
        if let i = openCLIndex { return "#\(i) \(name) (\(kind.rawValue))" }
        return "cpu (\(name))"
    }

    /// The label, then the measurements: GFLOP/s, GB/s, launch latency in µs and memory size, for `updraft devices`.
    public var description: String {
        "\(label): \(format(fmaGFLOPS)) GFLOP/s, \(format(bandwidthGBps)) GB/s, "
            + "\(format(launchLatencyMicroseconds)) µs launch, \(formatBytes(memoryBytes))"
            + (isHost ? "" : ", \(format(transferGBps)) GB/s and \(format(transferLatencyMicroseconds)) µs per copy to/from host"
                + ", set-up \(format(contextSeconds * 1e3)) ms + per program \(format(programBuildSeconds * 1e3)) ms built, "
                + "\(format(programLoadSeconds * 1e3)) ms cached")
    }

    /// Whether the numbers can be used: positive and finite.
    public var isUsable: Bool {
        [fmaGFLOPS, bandwidthGBps, transferGBps, matrixEfficiency].allSatisfy { $0.isFinite && $0 > 0 }
            && [launchLatencyMicroseconds, transferLatencyMicroseconds, contextSeconds, programBuildSeconds, programLoadSeconds]
                .allSatisfy { $0.isFinite && $0 >= 0 }
    }

    private func format(_ v: Double) -> String { v >= 100 ? String(format: "%.0f", v) : String(format: "%.3g", v) }
}
