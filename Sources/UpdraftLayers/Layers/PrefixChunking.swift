import Foundation
import UpdraftCore
import UpdraftModel

/// The first layers of a forward run taken a few images at a time instead of the whole batch at
/// once, so the large blobs between them (a stem convolution's output: 3.2 MiB an image for
/// SqueezeNet's and ResNet's, 200 MiB for a batch of 64) stay in the CPU's cache from the layer that
/// writes them to the one that reads them, instead of going out to memory and back. Every layer
/// that qualifies works on each image on its own (a frozen convolution, pooling, activation, concat,
/// batchnorm, …), so the result is the same as the whole batch's. The executor runs it
/// (`Executor+Chunking.swift`) on backends whose buffers are host memory (`CPUBuffer`); the
/// tuners measure those layers at the chunk's batch (`PassPlan.Entry.forwardBatches`).
public struct PrefixChunking: Sendable, Equatable {
    /// How many of the run's leading layers run a chunk at a time.
    public var layerCount: Int
    /// Images in a chunk (the last chunk of a batch may have fewer).
    public var images: Int

    public init(layerCount: Int, images: Int) {
        self.layerCount = layerCount
        self.images = images
    }

    /// A layer joins the chunked run only up to the last layer that reads or writes a blob of at least
    /// this many bytes an image (1 MiB, a core's L2 cache on today's server CPUs): past it, the blobs
    /// fit a core's cache anyway and whole-batch GEMMs are faster (running all of ResNet-18's prefix
    /// 8 images at a time was 20-30% slower).
    public static let largeBlobBytes = 1 << 20

    /// The bytes a chunk's live blobs may take: half the L3 cache the first core shares (the rest
    /// holds weights and scratch), 16 MiB when the size is unknown. Measured on a 2-core EPYC slice
    /// with 32 MiB of L3 (`updraft-bench epochs --epochs 4`, tuned, 3 interleaved rounds, steady ms):
    /// a quarter (SqueezeNet in chunks of 2 images) was 3% slower than whole batches; with a half the
    /// steady step stays within a few percent of whole batches (SqueezeNet 683/713/678 against
    /// 671/658/685, ResNet-18 1284/1288/1313 against 1310/1299/1356, MobileNetV2 797/825/844 against
    /// 798/787/771; after the depthwise tap sums moved to C, 791/826/797 against 807/802/808) while the
    /// peak host memory drops 670 -> 556, 975 -> 840 and 954 -> 455 MiB and the first step faults in
    /// that much less fresh memory (MobileNetV2: 183K -> 51K page faults; its first epoch +6-12% over
    /// the steady one against +17-25% whole); three quarters was no faster. Read from sysfs: glibc's
    /// `_SC_LEVEL3_CACHE_SIZE` gives the whole package's (320 MiB on a 2-core slice of an EPYC whose
    /// cores share 32 MiB).
    public static let cacheBudgetBytes: Int = {
        let path = "/sys/devices/system/cpu/cpu0/cache/index3/size"
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return 16 << 20 }
        return (parseCacheSize(text) ?? 32 << 20) / 2
    }()

    /// "32768K" (sysfs's form), "32M" or a plain byte count, in bytes.
    static func parseCacheSize(_ text: String) -> Int? {
        let t = text.trimmingCharacters(in: .whitespacesAndNewlines)
        let scale: Int
        switch t.last {
        case "K", "k": scale = 1 << 10
        case "M", "m": scale = 1 << 20
        default: scale = 1
        }
        guard let n = Int(scale == 1 ? t : String(t.dropLast())), n > 0 else { return nil }
        return n * scale
    }
}

extension TrainingGraph {
    /// How `layers` (a forward run's layers, in order) start chunked for a batch of `batch`, or nil
    /// when they do not: the leading frozen per-image layers up to the last one with a blob of at
    /// least `largeBlobBytes` an image, extended to the activation or residual add fused into
    /// a layer and the concat a convolution writes into, `images` chosen so that the inputs and output of
    /// the largest layer that runs (not a fused activation or a sliced concat) for a chunk fit
    /// `cacheBytes` (at least 1). Nil for a half-precision prefix,
    /// or when a chunk would be the whole batch.
    public func prefixChunking(layers: [GraphLayer], batch: Int, cacheBytes: Int = PrefixChunking.cacheBudgetBytes,
                               largeBlobBytes: Int = PrefixChunking.largeBlobBytes) -> PrefixChunking? {
        guard !halfPrecisionPrefix, batch > 1 else { return nil }
        let frozen = Set(prefix.map(\.name))
        var run = 0
        while run < layers.count, frozen.contains(layers[run].name), layers[run].op.kind.computesEachImageAlone(layers[run].op) { run += 1 }
        func bytes(_ shape: Shape) -> Int { shape.count * MemoryLayout<Float>.stride }
        func footprint(_ l: GraphLayer) -> Int { l.inputShapes.reduce(bytes(l.outputShape)) { $0 + bytes($1) } }
        guard var end = (0..<run).last(where: { i in
            ([layers[i].outputShape] + layers[i].inputShapes).contains { bytes($0) >= largeBlobBytes }
        }) else { return nil }
        // A fused activation or residual add, or a sliced concat, must run in the same chunks as its convolution.
        let index = Dictionary(layers.enumerated().map { ($0.element.name, $0.offset) }, uniquingKeysWith: { a, _ in a })
        var extended = true
        while extended {
            extended = false
            for l in layers[0...end] {
                let residual = fusedResiduals[l.name]
                let partners = [fusedActivations[l.name]?.name, concatSlices[l.name]?.concat.name,
                                residual?.add.name, residual?.activation?.name].compactMap { $0 }
                for p in partners { if let j = index[p], j > end { end = j; extended = true } }
            }
        }
        guard end < run else { return nil }
        // Fused activations and residual adds and sliced concats write nothing of their own.
        let skipped = fusedForwardNames.union(slicedConcats)
        let largest = layers[0...end].filter { !skipped.contains($0.name) }.map(footprint).max() ?? 1
        let images = max(1, cacheBytes / max(1, largest))
        guard images < batch else { return nil }
        return PrefixChunking(layerCount: end + 1, images: images)
    }
}
