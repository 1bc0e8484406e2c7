import XCTest
@testable import UpdraftCore
@testable import UpdraftModel
@testable import UpdraftPlacement

/// `updraft plan --frozen-fp16 / --feature-cache-fp16`: the plan shows what half storage would save
/// only when asked, never on its own; the figures are SqueezeNet's at batch 64.
final class SchedulingHalfPrecisionTests: XCTestCase {
    func testEffectOnSqueezeNet() throws {
        let graph = try NetworkGraph(model: try SqueezeNet.build(SqueezeNet.Options(labels: ["a", "b", "c"])))
        let e = try HalfPrecisionEffect(graph: graph, batchSize: 64, frozenActivations: true, featureCache: true)
        // conv1 + ReLU, pool1, and per fire module the squeeze's ReLU and the concat, pool3, pool5 (227x227 input).
        let written = 64 * (64 * 113 * 113 + 64 * 56 * 56 + 2 * (16 * 56 * 56 + 128 * 56 * 56) + 128 * 28 * 28
                            + 2 * (32 * 28 * 28 + 256 * 28 * 28) + 256 * 14 * 14
                            + 2 * (48 * 14 * 14 + 384 * 14 * 14) + 2 * (64 * 14 * 14 + 512 * 14 * 14))
        XCTAssertEqual(e.prefixActivationBytes, 4 * written)
        XCTAssertEqual(e.prefixActivationBytesHalf, 2 * written)
        XCTAssertLessThan(e.prefixMemoryBytesHalf, e.prefixMemoryBytes)
        XCTAssertEqual(e.boundary, ["fire9/concat"])
        XCTAssertEqual(2 * e.featureCacheRowBytesHalf, e.featureCacheRowBytes)
        XCTAssertEqual(e.featureCacheRowBytes, 512 * 14 * 14 * 4)
        XCTAssertEqual(Set(e.halfKernelLayers).union(e.convertedLayers), Set(e.halfLayers))
        for layer in ["conv1", "relu_conv1", "pool1", "fire2/squeeze1x1", "fire2/concat", "pool5", "fire9/expand3x3"] {
            XCTAssertTrue(e.halfKernelLayers.contains(layer), "\(layer) has a half kernel: \(e.convertedLayers)")
        }
        XCTAssertFalse(e.halfLayers.contains("conv10"), "conv10 trains: the tail stays fp32")
    }

    func testPlanShowsHalfPrecisionOnlyWhenAsked() throws {
        let dir = try makeTemporaryFolder("updraft-plan-fp16")
        defer { try? FileManager.default.removeItem(at: dir) }
        let model = dir.appendingPathComponent("squeezenet.mlmodel").path
        XCTAssertEqual(try runUpdraft(["create", "squeezenet", "--classes", "3", "--out", model], cacheDirectory: dir).status, 0)
        let base = ["plan", model, "--batch-size", "64", "--compute-units", "cpuOnly"]
        let plain = try runUpdraft(base, cacheDirectory: dir)
        XCTAssertEqual(plain.status, 0, plain.stderr)
        XCTAssertFalse(plain.stdout.contains("Half precision"), "never offered unasked: \(plain.stdout)")
        XCTAssertFalse(plain.stdout.contains("fp16 per"), plain.stdout)

        let asked = try runUpdraft(base + ["--frozen-fp16", "--feature-cache-fp16"], cacheDirectory: dir)
        XCTAssertEqual(asked.status, 0, asked.stderr)
        let e = try HalfPrecisionEffect(graph: try NetworkGraph(model: try CoreMLModel(contentsOf: URL(fileURLWithPath: model))),
                                        batchSize: 64, frozenActivations: true, featureCache: true)
        for expected in ["Half precision (asked for; the plan never turns it on by itself)",
                         "--frozen-fp16: frozen prefix activations \(formatBytes(UInt64(e.prefixActivationBytes))) fp32 -> "
                            + "\(formatBytes(UInt64(e.prefixActivationBytesHalf))) fp16 per batch of 64",
                         "stored as halves: every frozen layer's output, \(e.halfLayers.count) layers (conv1 ... fire9/concat)",
                         "on OpenCL \(e.halfLayers.count) of them run half kernels",
                         "handed to the tail as fp32 (rounded through halves): fire9/concat",
                         "--feature-cache-fp16: cached features \(formatBytes(UInt64(e.featureCacheRowBytes))) fp32 -> "] {
            XCTAssertTrue(asked.stdout.contains(expected), "missing '\(expected)' in \(asked.stdout)")
        }
        let onlyCache = try runUpdraft(base + ["--feature-cache-fp16", "--json"], cacheDirectory: dir)
        XCTAssertEqual(onlyCache.status, 0, onlyCache.stderr)
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(onlyCache.stdout.utf8)) as? [String: Any])
        let half = try XCTUnwrap(object["halfPrecision"] as? [String: Any])
        XCTAssertEqual(half["featureCache"] as? Bool, true)
        XCTAssertEqual(half["frozenActivations"] as? Bool, false)
        XCTAssertEqual(half["featureCacheRowBytesHalf"] as? Int, e.featureCacheRowBytesHalf)
        let plainJSON = try runUpdraft(base + ["--json"], cacheDirectory: dir)
        let plainObject = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(plainJSON.stdout.utf8)) as? [String: Any])
        XCTAssertNil(plainObject["halfPrecision"])
    }
}
