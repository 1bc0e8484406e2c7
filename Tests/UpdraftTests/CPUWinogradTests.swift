import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

/// The CPU backend's Winograd F(2x2, 3x3) forward pass against the Double reference and against its
/// own im2col path, on sizes that leave partial tiles (odd heights and widths), every padding, channel
/// counts that are multiples of nothing, slices of a wider output, the epilogue, both schedules and
/// more tiles than one block.
final class CPUWinogradTests: XCTestCase {
    private typealias Case = ConvolutionForwardCase

    private let cases: [Case] = [
        Case(spec: ConvolutionSpec(inputChannels: 5, outputChannels: 7, kernelH: 3, kernelW: 3), input: [3, 5, 9, 13]),
        Case(spec: ConvolutionSpec(inputChannels: 3, outputChannels: 4, kernelH: 3, kernelW: 3,
                                   padding: .same(.bottomRightHeavy), hasBias: false), input: [2, 3, 7, 4], epilogue: .relu),
        Case(spec: ConvolutionSpec(inputChannels: 6, outputChannels: 5, kernelH: 3, kernelW: 3,
                                   padding: .valid(top: 2, bottom: 0, left: 1, right: 3)), input: [1, 6, 5, 6],
             epilogue: .leakyReLU(alpha: 0.1)),
        Case(spec: ConvolutionSpec(inputChannels: 16, outputChannels: 17, kernelH: 3, kernelW: 3, padding: .same(.topLeftHeavy)),
             input: [3, 16, 14, 14], epilogue: .relu, offset: 4, total: 40),
        // 47 x 45 outputs: 24 x 23 tiles per image, more than one block (`winogradTileBlock(g)`, 448 here).
        Case(spec: ConvolutionSpec(inputChannels: 4, outputChannels: 3, kernelH: 3, kernelW: 3, padding: .same(.bottomRightHeavy)),
             input: [2, 4, 47, 45]),
        // F(4x4): 23 x 23 tiles, two blocks of 265 and 264 (the split as even as whole tiles allow).
        Case(spec: ConvolutionSpec(inputChannels: 4, outputChannels: 3, kernelH: 3, kernelW: 3, padding: .same(.bottomRightHeavy)),
             input: [1, 4, 90, 90]),
        // The smallest output Winograd takes: 2 x 2.
        Case(spec: ConvolutionSpec(inputChannels: 2, outputChannels: 2, kernelH: 3, kernelW: 3), input: [1, 2, 4, 4]),
    ]

    private func run(_ backend: Backend, _ c: Case, _ g: ConvGeometry, seed: UInt64, poison: Bool = false) throws -> [Float] {
        try c.run(backend, g, seed: seed, poison: poison)
    }

    func testWinogradMatchesReferenceAndIm2col() throws {
        for (i, c) in cases.enumerated() {
            let g = try c.spec.geometry(input: c.input)
            let seed = UInt64(100 + 10 * i)
            let expected = try run(ReferenceBackend(), c, g, seed: seed).map(Double.init)
            var im2col: [Float]?
            for algorithm in CPUConvolutionAlgorithm.allCases {
                for schedule in [CPUConvolutionSchedule.gemmThreads, .imageThreads] {
                    for threads in [1, 3] {
                        let be = CPUBackend(threads: threads)
                        be.convolutionAlgorithmOverride = algorithm
                        be.convolutionScheduleOverride = schedule
                        let got = try run(be, c, g, seed: seed)
                        assertWithin(got, expected, atol: 1e-4, rtol: 1e-4, "case \(i) \(c.spec) on \(c.input), \(algorithm), \(schedule), \(threads) threads")
                        if algorithm == .im2col { im2col = im2col ?? got }
                        // Winograd and im2col round differently, but no further apart than either is from the reference.
                        if algorithm != .im2col, let im2col {
                            assertWithin(got, im2col.map(Double.init), atol: 1e-4, rtol: 1e-4, "case \(i) Winograd against im2col")
                        }
                    }
                }
            }
        }
    }

    /// The schedule and thread count do not change a single bit of Winograd's output (training is
    /// reproducible whatever the machine's core count).
    func testWinogradIsDeterministicAcrossSchedules() throws {
        let c = cases[3]
        let g = try c.spec.geometry(input: c.input)
        // One block of tiles here: with more threads than blocks, the block's phases split over them.
        for algorithm in [CPUConvolutionAlgorithm.winograd, .winograd4x4] {
            var first: [Float]?
            for schedule in [CPUConvolutionSchedule.gemmThreads, .imageThreads] {
                for threads in [1, 2, 5] {
                    let be = CPUBackend(threads: threads)
                    be.convolutionAlgorithmOverride = algorithm
                    be.convolutionScheduleOverride = schedule
                    let got = try run(be, c, g, seed: 7)
                    if let first { XCTAssertEqual(got, first, "\(algorithm), \(schedule), \(threads) threads") } else { first = got }
                }
            }
        }
    }

    /// The tiles' blocks: every tile in exactly one block, blocks at most one tile apart in size, V
    /// and M rows an odd number of floats apart (rows a multiple of 16 floats apart ran up to 1.6x
    /// slower), and filters wider than 128 x 128 in as few blocks of up to 512 tiles as hold the batch's.
    func testWinogradBlocking() throws {
        let be = CPUBackend(threads: 1)
        let pad1 = ConvolutionPadding.valid(top: 1, bottom: 1, left: 1, right: 1)
        for (channels, side) in [(16, 56), (64, 56), (128, 28), (256, 14), (512, 7), (4, 90), (129, 129)] {
            for batch in [1, 3, 64] {
                let g = try ConvolutionSpec(inputChannels: channels, outputChannels: channels, kernelH: 3, kernelW: 3, padding: pad1)
                    .geometry(input: [batch, channels, side, side])
                for tile in [WinogradTile.f2, .f4] {
                    let total = batch * be.winogradTiles(g, tile).count
                    let (block, blocks, ld) = be.winogradBlocking(g, tile)
                    let last = total - (blocks - 1) * block
                    let name = "\(channels)@\(side) batch \(batch) \(tile)"
                    XCTAssertTrue(last >= 1 && last <= block && block - last < blocks, "\(name): \(blocks) x \(block), last \(last) of \(total)")
                    XCTAssertEqual(ld % 2, 1, name)
                    XCTAssertTrue(ld >= block && ld <= block + 1, name)
                    XCTAssertLessThanOrEqual(block, channels * channels > 128 * 128 ? 512 : 448, name)
                    if channels * channels > 128 * 128 { XCTAssertEqual(blocks, (total + 511) / 512, name) }
                }
            }
        }
    }

    /// Chosen by itself for 3x3 layers with 16 or more channels (ResNet's, SqueezeNet's expand3x3),
    /// F(4x4) where the output has 4 or more rows and columns, F(2x2) below that; not for
    /// thinner layers, where it measured no faster; never for shapes it cannot compute (stride 2, 1x1,
    /// dilated, grouped), even when forced. The backward pass for the input follows the same rule on
    /// its swapped geometry.
    func testAlgorithmChoice() throws {
        let be = CPUBackend()
        be.convolutionTuning = nil  // the built-in rule, whatever `updraft tune --cpu` stored for this user
        func choice(_ spec: ConvolutionSpec, _ input: Shape) throws -> CPUConvolutionAlgorithm {
            be.forwardAlgorithm(for: try spec.geometry(input: input))
        }
        let pad1 = ConvolutionPadding.valid(top: 1, bottom: 1, left: 1, right: 1)
        XCTAssertEqual(try choice(ConvolutionSpec(inputChannels: 256, outputChannels: 256, kernelH: 3, kernelW: 3, padding: pad1),
                                  [8, 256, 14, 14]), .winograd4x4)
        XCTAssertEqual(try choice(ConvolutionSpec(inputChannels: 32, outputChannels: 128, kernelH: 3, kernelW: 3,
                                                  padding: .same(.bottomRightHeavy)), [64, 32, 28, 28]), .winograd4x4)
        XCTAssertEqual(try choice(ConvolutionSpec(inputChannels: 64, outputChannels: 64, kernelH: 3, kernelW: 3, padding: pad1),
                                  [8, 64, 3, 3]), .winograd)
        XCTAssertEqual(be.backwardDataAlgorithm(for: try ConvolutionSpec(inputChannels: 512, outputChannels: 512, kernelH: 3, kernelW: 3,
                                                                         padding: pad1).geometry(input: [8, 512, 7, 7])), .winograd4x4)
        XCTAssertEqual(be.backwardDataAlgorithm(for: try ConvolutionSpec(inputChannels: 16, outputChannels: 64, kernelH: 3, kernelW: 3,
                                                                         padding: pad1).geometry(input: [8, 16, 28, 28])), .winograd4x4)
        XCTAssertEqual(be.backwardDataAlgorithm(for: try ConvolutionSpec(inputChannels: 8, outputChannels: 64, kernelH: 3, kernelW: 3,
                                                                         padding: pad1).geometry(input: [8, 8, 28, 28])), .im2col)
        XCTAssertEqual(try choice(ConvolutionSpec(inputChannels: 16, outputChannels: 64, kernelH: 3, kernelW: 3,
                                                  padding: .same(.bottomRightHeavy)), [64, 16, 56, 56]), .winograd4x4)
        XCTAssertEqual(try choice(ConvolutionSpec(inputChannels: 8, outputChannels: 64, kernelH: 3, kernelW: 3,
                                                  padding: .same(.bottomRightHeavy)), [64, 8, 56, 56]), .im2col)
        // First layers (up to 4 input channels, K up to 160) take the small-K direct convolution, as do
        // 1x1 layers with K up to 48; others stay on im2col.
        XCTAssertEqual(try choice(ConvolutionSpec(inputChannels: 3, outputChannels: 64, kernelH: 3, kernelW: 3), [1, 3, 32, 32]), .direct)
        XCTAssertEqual(try choice(ConvolutionSpec(inputChannels: 3, outputChannels: 64, kernelH: 7, kernelW: 7, strideH: 2, strideW: 2),
                                  [1, 3, 32, 32]), .direct)
        XCTAssertEqual(try choice(ConvolutionSpec(inputChannels: 8, outputChannels: 64, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2),
                                  [1, 8, 32, 32]), .im2col)
        XCTAssertEqual(try choice(ConvolutionSpec(inputChannels: 64, outputChannels: 16, kernelH: 1, kernelW: 1), [1, 64, 32, 32]), .im2col)
        be.convolutionAlgorithmOverride = .winograd
        XCTAssertEqual(try choice(ConvolutionSpec(inputChannels: 3, outputChannels: 64, kernelH: 3, kernelW: 3), [1, 3, 32, 32]), .winograd)
        for spec in [ConvolutionSpec(inputChannels: 16, outputChannels: 16, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2),
                     ConvolutionSpec(inputChannels: 16, outputChannels: 16, kernelH: 1, kernelW: 1),
                     ConvolutionSpec(inputChannels: 16, outputChannels: 16, kernelH: 3, kernelW: 3, dilationH: 2, dilationW: 2),
                     ConvolutionSpec(inputChannels: 16, outputChannels: 16, kernelH: 3, kernelW: 3, groups: 2)] {
            // Winograd cannot run these: the built-in rule decides (the 1x1 goes to the direct convolution).
            XCTAssertEqual(try choice(spec, [1, 16, 20, 20]), spec.kernelH == 1 ? .direct : .im2col, "\(spec)")
        }
    }
}
