import UpdraftBackends
import UpdraftModel
import UpdraftLayers
import UpdraftCore

/// What the half-precision options would change for a graph at one batch size, for `updraft plan
/// --frozen-fp16 / --feature-cache-fp16`. The plan shows it only when asked: it never turns either
/// option on by itself (half storage rounds the values, so it is the user's call).
public struct HalfPrecisionEffect: Codable, Sendable {
    /// Examples per batch the byte figures are for.
    public var batchSize: Int
    /// Whether `--frozen-fp16` (`UpdateConfiguration.frozenActivationsHalfPrecision`) was asked about.
    public var frozenActivations: Bool
    /// Whether `--feature-cache-fp16` (`UpdateConfiguration.featureCache.halfPrecision`) was asked about.
    public var featureCache: Bool
    /// Bytes of the frozen prefix's activations per batch (every blob its layers write), fp32 and as halves.
    public var prefixActivationBytes: Int, prefixActivationBytesHalf: Int
    /// The prefix's memory estimate per batch (activations, parameters, input; with halves also the
    /// boundary blobs' fp32 copies for the tail), fp32 and with the option.
    public var prefixMemoryBytes: Int, prefixMemoryBytesHalf: Int
    /// Prefix layers whose outputs are stored as halves, in order.
    public var halfLayers: [String]
    /// Of those, the ones that read and write halves in their own OpenCL kernel (dense convolutions,
    /// windowed pooling), or write them in another's (a fused activation in its convolution's
    /// epilogue, a concat its convolutions write into).
    public var halfKernelLayers: [String]
    /// The others: fp32 between conversions at their boundary (and every layer on the CPU).
    public var convertedLayers: [String]
    /// Blobs the tail receives as floats (converted once after the prefix; they carry the rounding).
    public var boundary: [String]
    /// Bytes the feature cache keeps per example, fp32 and as halves.
    public var featureCacheRowBytes: Int, featureCacheRowBytesHalf: Int

    /// The effect for `graph` at `batchSize`. Throws what `GraphAnalysis` throws for a batch size it cannot plan.
    public init(graph: NetworkGraph, batchSize: Int, frozenActivations: Bool, featureCache: Bool) throws {
        self.batchSize = batchSize
        self.frozenActivations = frozenActivations
        self.featureCache = featureCache
        let full = try GraphAnalysis(graph: graph, batch: batchSize)
        let half = try GraphAnalysis(graph: graph, batch: batchSize, halfPrecisionPrefix: true)
        prefixMemoryBytes = Int(clamping: full.prefixMemory)
        prefixMemoryBytesHalf = Int(clamping: half.prefixMemory)
        boundary = full.boundary.map(\.blob)
        let rowValues = full.boundary.reduce(0) { $0 + $1.bytes } / 4 / max(1, batchSize)
        featureCacheRowBytes = rowValues * 4
        featureCacheRowBytesHalf = rowValues * 2
        halfLayers = []
        halfKernelLayers = []
        convertedLayers = []
        prefixActivationBytes = 0
        prefixActivationBytesHalf = 0
        guard let training = try? TrainingGraph(graph: graph) else { return }
        let fused = training.fusedActivationNames, sliced = training.slicedConcats
        // Blobs written: a convolution with a fused activation writes the activation's output, and
        // one that writes a concat's slice writes the concat's.
        let unwritten = Set(training.fusedActivations.keys).union(training.concatSlices.keys.compactMap { training.fusedActivations[$0]?.name })
        let written = training.prefix.filter { !unwritten.contains($0.name) }.reduce(0) { $0 + $1.outputShape.withBatch(batchSize).count }
        prefixActivationBytes = written * 4
        prefixActivationBytesHalf = HalfStorage.floats(for: written, half: true) * 4
        for layer in training.prefix {
            halfLayers.append(layer.name)
            let inside = fused.contains(layer.name) || sliced.contains(layer.name)
            let kernel = layer.op.kind.hasHalfKernel(layer, runsInsideAnother: inside)
            if kernel { halfKernelLayers.append(layer.name) } else { convertedLayers.append(layer.name) }
        }
    }

    /// The plan's section: the bytes fp32 against fp16 for each option asked about, and which layers store halves.
    public func text() -> String {
        var s = "\nHalf precision (asked for; the plan never turns it on by itself):\n"
        if frozenActivations {
            if halfLayers.isEmpty {
                s += "  --frozen-fp16: no frozen layers before the first updatable layer; training refuses the option for this model\n"
            } else {
                s += "  --frozen-fp16: frozen prefix activations \(formatBytes(UInt64(prefixActivationBytes))) fp32 -> "
                    + "\(formatBytes(UInt64(prefixActivationBytesHalf))) fp16 per batch of \(batchSize) (every blob it writes); "
                    + "prefix memory estimate \(formatBytes(UInt64(prefixMemoryBytes))) -> \(formatBytes(UInt64(prefixMemoryBytesHalf)))\n"
                let range = halfLayers.count > 1 ? "\(halfLayers[0]) ... \(halfLayers[halfLayers.count - 1])" : halfLayers[0]
                s += "    stored as halves: every frozen layer's output, \(halfLayers.count) layers (\(range))\n"
                s += "    on OpenCL \(halfKernelLayers.count) of them run half kernels (convolutions with their fused activations and "
                    + "concat slices, windowed pooling); fp32 between conversions: "
                    + "\(convertedLayers.isEmpty ? "none" : convertedLayers.joined(separator: ", ")) (on the CPU: every layer)\n"
                s += "    handed to the tail as fp32 (rounded through halves): \(boundary.joined(separator: ", "))\n"
                s += "    arithmetic stays fp32; each stored value is rounded to nearest even\n"
            }
        }
        if featureCache {
            if boundary.isEmpty {
                s += "  --feature-cache-fp16: no frozen prefix, so no feature cache for this model\n"
            } else {
                s += "  --feature-cache-fp16: cached features \(formatBytes(UInt64(featureCacheRowBytes))) fp32 -> "
                    + "\(formatBytes(UInt64(featureCacheRowBytesHalf))) fp16 per example (twice the examples per budget)\n"
            }
        }
        return s
    }
}
