import Foundation
import UpdraftCore

/// Which CPU convolution algorithm runs each layer shape and pass, as `updraft tune --cpu` measured it:
/// the stored choice, so a run never times anything and its results are reproducible. Kept in
/// `cpu-convolution-tuning.json` in the cache folder (`CacheDirectory`), one entry per CPU model,
/// oneDNN version (or "none") and thread count; an entry for another CPU model or library version is
/// never used, so a copied cache or an upgraded library falls back to the built-in rule.
public struct CPUConvolutionTuning: Codable, Sendable, Equatable {
    /// The file's name in the cache folder.
    public static let fileName = "cpu-convolution-tuning.json"
    /// Bumped when the meaning of an entry changes; a file of another format reads as empty. 2: oneDNN's
    /// forward convolution lets the library choose its algorithm (its Winograd on AVX-512), so a stored
    /// choice between oneDNN and the own algorithms was measured against another oneDNN.
    public static let formatVersion = 2

    /// algorithm by pass, by `shapeKey`.
    public var choices: [String: [CPUConvolutionPass.RawValue: CPUConvolutionAlgorithm]]
    /// When it was measured.
    public var measuredAt: Date
    /// Pooling and inner-product engine by pass, by `CPUOpShape.key` (OneDNNOps.swift); absent in older files.
    public var opEngines: [String: [CPUOpPass.RawValue: CPUOpEngine]]?

    public init(choices: [String: [CPUConvolutionPass.RawValue: CPUConvolutionAlgorithm]] = [:], measuredAt: Date = Date()) {
        self.choices = choices
        self.measuredAt = measuredAt
    }

    /// The stored algorithm for `g`'s `pass`, if one was measured.
    public func choice(_ g: ConvGeometry, _ pass: CPUConvolutionPass) -> CPUConvolutionAlgorithm? {
        choices[Self.shapeKey(g)]?[pass.rawValue]
    }

    /// Records `algorithm` for `g`'s `pass`.
    public mutating func set(_ algorithm: CPUConvolutionAlgorithm, for g: ConvGeometry, _ pass: CPUConvolutionPass) {
        choices[Self.shapeKey(g), default: [:]][pass.rawValue] = algorithm
    }

    /// Everything the algorithms' speed depends on: batch, channels, sizes, kernel, stride, padding,
    /// dilation, groups, bias ("n64 c64x55x55 k128 3x3 s1x1 p1,1,1,1 d1x1 g1 b1").
    public static func shapeKey(_ g: ConvGeometry) -> String {
        "n\(g.batch) c\(g.inChannels)x\(g.inHeight)x\(g.inWidth) k\(g.outChannels) \(g.kernelH)x\(g.kernelW)"
            + " s\(g.strideH)x\(g.strideW) p\(g.padTop),\(g.padBottom),\(g.padLeft),\(g.padRight)"
            + " d\(g.dilationH)x\(g.dilationW) g\(g.groups) b\(g.hasBias ? 1 : 0)"
    }

    /// The entry key for this machine: CPU model, oneDNN version ("none" without it), thread count,
    /// and the vector level when `UPDRAFT_CPU_LEVEL` forces one below the CPU's best (both engines then
    /// run other code, so a choice measured at the best level is not theirs).
    public static func machineKey(cpuName: String = HostInfo.current.cpuName, oneDNNVersion: String? = OneDNN.version,
                                  threads: Int) -> String {
        let forced = CPUVectorLevel.active == CPUVectorLevel.supported ? "" : "|\(CPUVectorLevel.active) level"
        return "\(cpuName)|oneDNN \(oneDNNVersion ?? "none")|\(threads) threads" + forced
    }

    private static func file(_ directory: URL) -> CacheFile<CPUConvolutionTuning> {
        CacheFile(url: directory.appendingPathComponent(fileName), format: formatVersion, what: "the CPU convolution tuning")
    }

    /// The stored tuning for `machineKey` in `directory`; nil when none (or the file is unreadable).
    public static func load(directory: URL, machineKey: String) -> CPUConvolutionTuning? {
        file(directory).load()[machineKey]
    }

    /// The tuning stored for this machine in the cache folder of `environment`, if any. oneDNN is
    /// loaded (for its version) only when the file exists.
    public static func stored(threads: Int, environment: [String: String] = ProcessInfo.processInfo.environment) -> CPUConvolutionTuning? {
        let directory = CacheDirectory.url(environment: environment)
        guard FileManager.default.fileExists(atPath: directory.appendingPathComponent(fileName).path) else { return nil }
        return load(directory: directory, machineKey: machineKey(threads: threads))
    }

    /// Stores `tuning` under `machineKey`, keeping the other machines' entries.
    public func store(directory: URL, machineKey: String) throws {
        let f = Self.file(directory)
        var entries = f.load()
        entries[machineKey] = self
        try f.write(entries)
    }
}
