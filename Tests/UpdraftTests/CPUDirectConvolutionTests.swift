import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

/// The small-K direct convolution (`CPUConvolutionAlgorithm.direct`, the C kernel
/// `upd_conv_small_rows`) against the Double reference at every vector level this CPU runs: strides,
/// asymmetric and "same" padding, dilation, channel counts that are not multiples of its 8-channel
/// blocks, widths that are not multiples of its 16 columns, a ReLU fused at the store (NaN to 0), a
/// leaky ReLU as a pass after, a slice of a wider output; the same bits on 1 and 3 threads.
final class CPUDirectConvolutionTests: XCTestCase {
    private typealias Case = ConvolutionForwardCase

    private let cases: [Case] = [
        // SqueezeNet's conv1 on a smaller image: 3x3 stride 2, K = 27, 64 channels.
        Case(spec: ConvolutionSpec(inputChannels: 3, outputChannels: 64, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2),
             input: [3, 3, 37, 41], epilogue: .relu),
        // MobileNetV2's: "same" padding, 32 channels, no bias.
        Case(spec: ConvolutionSpec(inputChannels: 3, outputChannels: 32, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2,
                                   padding: .same(.bottomRightHeavy), hasBias: false), input: [2, 3, 30, 30]),
        // ResNet's 7x7 stride 2 (K = 147), 13 channels (a partial block), into a slice of 20.
        Case(spec: ConvolutionSpec(inputChannels: 3, outputChannels: 13, kernelH: 7, kernelW: 7, strideH: 2, strideW: 2,
                                   padding: .valid(top: 3, bottom: 3, left: 3, right: 3)), input: [2, 3, 23, 19],
             epilogue: .relu, offset: 5, total: 20),
        // Stride 1 with asymmetric padding wider than the kernel's reach on one side, a leaky ReLU.
        Case(spec: ConvolutionSpec(inputChannels: 2, outputChannels: 9, kernelH: 3, kernelW: 5,
                                   padding: .valid(top: 2, bottom: 0, left: 4, right: 1)), input: [1, 2, 6, 17],
             epilogue: .leakyReLU(alpha: 0.1)),
        // 228 columns: chunks of 2 output rows (one run of 456 columns), items of 17 rows, so both
        // an item and the last chunk of each item end part-way.
        Case(spec: ConvolutionSpec(inputChannels: 2, outputChannels: 10, kernelH: 3, kernelW: 3), input: [1, 2, 37, 230],
             epilogue: .relu),
        // 1x1 stride 1 unpadded: the columns are read from the image itself; 7 x 9 = 63 outputs, so
        // the last block runs past the plane and is copied, zero-padded.
        Case(spec: ConvolutionSpec(inputChannels: 37, outputChannels: 12, kernelH: 1, kernelW: 1), input: [3, 37, 7, 9],
             epilogue: .relu, offset: 2, total: 16),
        // Dilation, one output channel, an output narrower than one column block.
        Case(spec: ConvolutionSpec(inputChannels: 4, outputChannels: 1, kernelH: 3, kernelW: 3, dilationH: 2, dilationW: 3),
             input: [2, 4, 11, 12]),
    ]

    private func run(_ backend: Backend, _ c: Case, _ g: ConvGeometry, seed: UInt64, poison: Bool = false) throws -> [Float] {
        try c.run(backend, g, seed: seed, poison: poison)
    }

    func testMatchesTheReferenceAtEveryLevelAndThreadCount() throws {
        let start = CPUVectorLevel.active
        defer { CPUVectorLevel.force(start) }
        for level in CPUVectorLevel.allCases where level.rawValue <= CPUVectorLevel.supported.rawValue {
            CPUVectorLevel.force(level)
            for (i, c) in cases.enumerated() {
                let g = try c.spec.geometry(input: c.input)
                let seed = UInt64(40 + 10 * i)
                let expected = try run(ReferenceBackend(), c, g, seed: seed).map(Double.init)
                var first: [Float]?
                for threads in [1, 3] {
                    let be = CPUBackend(threads: threads)
                    be.convolutionAlgorithmOverride = .direct
                    XCTAssertEqual(be.forwardAlgorithm(for: g), .direct, "case \(i)")
                    let got = try run(be, c, g, seed: seed)
                    assertWithin(got, expected, atol: 1e-4, rtol: 1e-4, "case \(i) \(c.spec) on \(c.input), \(level), \(threads) threads")
                    if let first {
                        XCTAssertEqual(first.map(\.bitPattern), got.map(\.bitPattern), "case \(i) \(level): the thread count changes nothing")
                    }
                    first = first ?? got
                }
            }
        }
    }

    /// The ReLU applied at the store gives what the separate pass gives: a NaN in a window becomes 0.
    func testTheFusedReLUTurnsNaNIntoZeroAsThePassDoes() throws {
        let c = cases[0]
        let g = try c.spec.geometry(input: c.input)
        let be = CPUBackend(threads: 2)
        be.convolutionAlgorithmOverride = .direct
        let fused = try run(be, c, g, seed: 3, poison: true)
        var plain = c
        plain.epilogue = nil
        let unfused = try run(be, plain, g, seed: 3, poison: true)
        XCTAssertTrue(unfused.contains { $0.isNaN }, "the poisoned windows")
        XCTAssertEqual(fused, unfused.map { $0 > 0 ? $0 : 0 })
    }

    /// Forced on a shape it cannot run (grouped, or K over `directMaxK`), the backend runs its own
    /// rule instead; the built-in rule takes it for first layers only.
    func testItRunsWhereItAppliesAndTheRuleTakesItForFirstLayers() throws {
        let be = CPUBackend()
        be.convolutionAlgorithmOverride = .direct
        let grouped = try ConvolutionSpec(inputChannels: 4, outputChannels: 4, kernelH: 3, kernelW: 3, groups: 2).geometry(input: [1, 4, 8, 8])
        XCTAssertNotEqual(be.forwardAlgorithm(for: grouped), .direct)
        let wide = try ConvolutionSpec(inputChannels: 64, outputChannels: 8, kernelH: 3, kernelW: 3).geometry(input: [1, 64, 8, 8])
        XCTAssertNotEqual(be.forwardAlgorithm(for: wide), .direct, "K = 576")
        XCTAssertEqual(be.backwardDataAlgorithm(for: try cases[0].spec.geometry(input: cases[0].input)), .im2col, "forward only")
        be.convolutionAlgorithmOverride = nil
        XCTAssertEqual(be.forwardAlgorithm(for: try cases[0].spec.geometry(input: cases[0].input)), .direct, "K = 27")
        XCTAssertEqual(be.forwardAlgorithm(for: try cases[2].spec.geometry(input: cases[2].input)), .direct, "K = 147, 3 channels")
        XCTAssertEqual(be.forwardAlgorithm(for: try cases[5].spec.geometry(input: cases[5].input)), .direct, "1x1 with K = 37")
    }
}
