import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

final class GradientCheckTests: XCTestCase {
    func testEveryReferenceGradientMatchesFiniteDifferences() {
        let rows = GradientCheck.run(.gradientCheck)
        let failures = rows.filter { !$0.ok }
        XCTAssertTrue(failures.isEmpty, "\n" + ComparisonRow.table(failures))
        // every op family with a gradient or an update is covered, with every gradient it has
        let ops = Set(rows.map(\.op))
        XCTAssertEqual(ops, ["convolution", "innerProduct", "activation", "pooling", "concat", "softmax",
                             "softmaxCrossEntropy", "meanSquaredError", "channelAffine", "elementwise", "sgd", "adam",
                             "padding", "upsample", "resizeBilinear", "cropResize", "lrn", "l2normalize", "instanceNormalization", "broadcast", "reduce", "transpose", "concatND", "constantPad",
                             "layerNormalization"])
        let convolutionQuantities = Set(rows.filter { $0.op == "convolution" }.map(\.quantity))
        XCTAssertEqual(convolutionQuantities, ["dx", "dw", "db"])
        XCTAssertEqual(Set(rows.filter { $0.op == "adam" }.map(\.quantity)), ["w", "m", "v"])
    }

    func testQuickListHasOneCasePerOpAndFiltersByOpName() {
        let quick = [OpCase].gradientCheckQuick
        XCTAssertEqual(quick.count, Set(quick.map(\.op)).count)
        let pooling = GradientCheck.run(.gradientCheck, only: "POOL")
        XCTAssertFalse(pooling.isEmpty)
        XCTAssertTrue(pooling.allSatisfy { $0.op == "pooling" })
    }

    /// The reference convolution with a weight gradient that is off by 0.1%: the checker must flag dw
    /// and only dw.
    func testDetectsASlightlyWrongGradient() throws {
        let g = try ConvolutionSpec(inputChannels: 2, outputChannels: 2, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2,
                                    padding: .valid(top: 1, bottom: 0, left: 0, right: 1)).geometry(input: [1, 2, 5, 5])
        var rng = SplitMix64(seed: 7)
        let inputs = [GradientCheck.Input("x", GradientCheck.uniform(g.inputShape.count, -1...1, &rng)),
                      GradientCheck.Input("w", GradientCheck.uniform(g.weightShape.count, -1...1, &rng)),
                      GradientCheck.Input("b", GradientCheck.uniform(g.outChannels, -1...1, &rng))]
        func problem(weightScale: Double) -> GradientCheck.Problem {
            GradientCheck.Problem(inputs: inputs, forward: { v in
                try Reference.convolutionForward(g, input: v[0], weights: v[1], bias: v[2])
            }, backward: { v, dy in
                let dx = try Reference.convolutionBackwardData(g, outputGradient: dy, weights: v[1])
                let (dw, db) = try Reference.convolutionBackwardWeights(g, input: v[0], outputGradient: dy)
                return [dx, dw.map { $0 * weightScale }, db]
            })
        }
        let correct = GradientCheck.check(op: "convolution", caseName: "correct", problem(weightScale: 1))
        XCTAssertEqual(correct.map(\.ok), [true, true, true], ComparisonRow.table(correct))
        let broken = GradientCheck.check(op: "convolution", caseName: "broken", problem(weightScale: 1.001))
        XCTAssertEqual(broken.map(\.quantity), ["dx", "dw", "db"])
        XCTAssertEqual(broken.map(\.ok), [true, false, true], ComparisonRow.table(broken))
    }

    /// A classic bug: the cross-entropy gradient not divided by the batch size (and a pooling gradient
    /// sent to the last maximum instead of the first would be another; here, one element dropped).
    func testDetectsWrongScaleAndAMissingTerm() throws {
        let g = SoftmaxGeometry(batch: 3, channels: 4)
        var rng = SplitMix64(seed: 3)
        let z = GradientCheck.uniform(12, -2...2, &rng)
        let labels: [Double] = [0, 3, 1]
        let unscaled = GradientCheck.Problem(inputs: [.init("z", z), .init("labels", labels, differentiable: false)],
                                             forward: { v in [try Reference.softmaxCrossEntropy(g, logits: v[0], labels: v[1]).loss] },
                                             backward: { v, dy in
            [try Reference.softmaxCrossEntropy(g, logits: v[0], labels: v[1]).logitsGradient.map { $0 * dy[0] * 3 }, nil]
        })
        let rows = GradientCheck.check(op: "softmaxCrossEntropy", caseName: "not divided by N", unscaled)
        XCTAssertEqual(rows.count, 1)  // labels are not differentiated
        XCTAssertFalse(rows[0].ok)

        let pool = try PoolingSpec(kind: .average, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2,
                                   padding: .includeLastPixel(height: 0, width: 0)).geometry(input: [1, 1, 6, 6])
        let missing = GradientCheck.Problem(inputs: [.init("x", GradientCheck.uniform(36, -1...1, &rng))],
                                            forward: { v in try Reference.poolingForward(pool, input: v[0]) },
                                            backward: { v, dy in
            var dx = try Reference.poolingBackward(pool, input: v[0], outputGradient: dy)
            dx[35] = 0  // forget the corner pixel that only the overhanging last window sees
            return [dx]
        })
        XCTAssertFalse(GradientCheck.check(op: "pooling", caseName: "missing corner", missing)[0].ok)
    }

    func testMalformedBackwardFailsInsteadOfCrashing() {
        let problem = GradientCheck.Problem(inputs: [.init("x", [1, 2, 3])], forward: { v in v[0] },
                                            backward: { _, dy in [Array(dy.prefix(2))] })
        let rows = GradientCheck.check(op: "identity", caseName: "short gradient", problem)
        XCTAssertEqual(rows.count, 1)
        XCTAssertFalse(rows[0].ok)
        let throwing = GradientCheck.Problem(inputs: [.init("x", [1])], forward: { _ in
            throw UpdraftError(.invalidArgument, "no forward")
        }, backward: { _, _ in [] })
        let failed = GradientCheck.check(op: "identity", caseName: "throws", throwing)
        XCTAssertEqual(failed.map(\.quantity), ["error"])
        XCTAssertEqual(failed.first?.ok, false)
    }

    /// A case whose geometry cannot be built reports a failed row naming the error.
    func testUnbuildableCaseIsAFailedRow() {
        let rows = GradientCheck.check(.convolution([1, 1, 2, 2], outputChannels: 1, kernel: (3, 3)))
        XCTAssertEqual(rows.count, 1)
        XCTAssertFalse(rows[0].ok)
        XCTAssertTrue(rows[0].note?.contains("larger than the padded input") ?? false)
    }

    func testToleranceUsesTheTensorScaleForNearZeroElements() {
        // 1e-3 off on an element that cancelled to ~0, in a tensor of magnitude ~10: fine at rtol 1e-3 ...
        let reference: [Double] = [10, -10, 1e-6]
        let got: [Double] = [10, -10, 1e-3]
        XCTAssertTrue(ComparisonError(got: got, reference: reference, tolerance: .float32).ok)
        // ... but not a plain atol + rtol * |ref| comparison on a tensor of magnitude ~1e-6
        XCTAssertFalse(ComparisonError(got: [1e-6, 1e-3], reference: [1e-6, 1e-6], tolerance: .float32).ok)
        XCTAssertFalse(ComparisonError(got: [.nan], reference: [1], tolerance: .float32).ok)
        XCTAssertFalse(ComparisonError(got: [1, 2], reference: [1], tolerance: .float32).ok)
        XCTAssertTrue(ComparisonError(got: [], reference: [], tolerance: .exact).ok)
    }
}
