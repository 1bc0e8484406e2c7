import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

/// Convolutions writing a channel slice of a wider output (what lets the executor skip a concat):
/// the CPU and OpenCL backends against the reference backend's host-side default, on awkward shapes,
/// with the channels outside the slice left as they were.
final class BackendConvolutionSliceTests: XCTestCase {
    struct Case {
        var spec: ConvolutionSpec
        var input: Shape
        var offset: Int
        var total: Int
        var relu: Bool
    }

    let cases: [Case] = [
        // 1x1 stride 1 unpadded: the OpenCL pointwise program and the CPU's no-im2col path.
        Case(spec: ConvolutionSpec(inputChannels: 5, outputChannels: 3, kernelH: 1, kernelW: 1), input: [3, 5, 7, 6],
             offset: 0, total: 7, relu: true),
        Case(spec: ConvolutionSpec(inputChannels: 5, outputChannels: 3, kernelH: 1, kernelW: 1, hasBias: false),
             input: [2, 5, 4, 9], offset: 4, total: 7, relu: false),
        // 3x3 padded, as a fire module's expand3x3 after its expand1x1.
        Case(spec: ConvolutionSpec(inputChannels: 4, outputChannels: 6, kernelH: 3, kernelW: 3,
                                   padding: .valid(top: 1, bottom: 1, left: 1, right: 1)),
             input: [3, 4, 9, 8], offset: 6, total: 12, relu: true),
        // Strided, dilated and grouped, in the middle of the output.
        Case(spec: ConvolutionSpec(inputChannels: 4, outputChannels: 6, kernelH: 2, kernelW: 3, strideH: 2, dilationW: 2,
                                   groups: 2, padding: .valid(top: 1, bottom: 2, left: 0, right: 1)),
             input: [2, 4, 11, 10], offset: 5, total: 13, relu: false),
        // The whole output: the plain forward.
        Case(spec: ConvolutionSpec(inputChannels: 3, outputChannels: 5, kernelH: 3, kernelW: 3), input: [1, 3, 6, 5],
             offset: 0, total: 5, relu: true),
    ]

    func check(_ backend: Backend, file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertTrue(backend.writesConvolutionSlices, "\(backend.name) writes slices natively", file: file, line: line)
        let reference = ReferenceBackend()
        for (i, c) in cases.enumerated() {
            let g = try c.spec.geometry(input: c.input)
            let x = Tensor(shape: c.input, uniformIn: -1...1, seed: UInt64(10 + i))
            let w = Tensor(shape: g.weightShape, uniformIn: -1...1, seed: UInt64(20 + i))
            let b = Tensor(shape: [g.outChannels], uniformIn: -1...1, seed: UInt64(30 + i))
            let wide = Tensor(shape: [g.batch, c.total, g.outHeight, g.outWidth], uniformIn: 5...6, seed: UInt64(40 + i))
            func run(_ be: Backend) throws -> [Float] {
                let y = try be.makeBuffer(wide)
                try be.convolutionForward(g, input: try be.makeBuffer(x), weights: try be.makeBuffer(w),
                                          bias: g.hasBias ? try be.makeBuffer(b) : nil, output: y,
                                          channelOffset: c.offset, outputChannels: c.total, fusedReLU: c.relu)
                return try be.download(y)
            }
            let expected = try run(reference), got = try run(backend)
            // The slice holds the plain convolution's output; everything else is untouched.
            let plain = try reference.makeBuffer(count: g.outputShape.count)
            try reference.convolutionForward(g, input: try reference.makeBuffer(x), weights: try reference.makeBuffer(w),
                                             bias: g.hasBias ? try reference.makeBuffer(b) : nil, output: plain, fusedReLU: c.relu)
            let own = try reference.download(plain), plane = g.outHeight * g.outWidth
            for n in 0..<g.batch {
                for ch in 0..<c.total {
                    for s in 0..<plane {
                        let at = (n * c.total + ch) * plane + s
                        let inSlice = ch >= c.offset && ch < c.offset + g.outChannels
                        let want = inSlice ? own[(n * g.outChannels + ch - c.offset) * plane + s] : wide.data[at]
                        XCTAssertEqual(expected[at], want, "reference default, case \(i)", file: file, line: line)
                        if inSlice {
                            XCTAssertEqual(got[at], want, accuracy: 1e-4 * max(1, abs(want)),
                                           "\(backend.name) case \(i) image \(n) channel \(ch)", file: file, line: line)
                        } else {
                            XCTAssertEqual(got[at], want, "\(backend.name) case \(i): channel \(ch) outside the slice changed",
                                           file: file, line: line)
                        }
                    }
                }
            }
        }
    }

    func testCPUBackendWritesSlices() throws {
        try check(CPUBackend())
        try check(CPUBackend(threads: 1))
    }

    func testOpenCLBackendWritesSlices() throws {
        try check(OpenCLBackend(context: try OpenCLTestSupport.context()))
    }

    func testSlicesThatDoNotFitAreRefused() throws {
        let g = try ConvolutionSpec(inputChannels: 2, outputChannels: 3, kernelH: 1, kernelW: 1).geometry(input: [2, 2, 3, 3])
        var backends: [Backend] = [ReferenceBackend(), CPUBackend()]
        if let ctx = try? OpenCLTestSupport.context() { backends.append(OpenCLBackend(context: ctx)) }
        for be in backends {
            let x = try be.makeBuffer(count: 36), w = try be.makeBuffer(count: 6), y = try be.makeBuffer(count: 2 * 5 * 9)
            for (offset, total) in [(3, 5), (-1, 5), (0, 2), (Int.max, 5), (0, 6)] {
                XCTAssertThrowsError(try be.convolutionForward(g, input: x, weights: w, bias: try be.makeBuffer(count: 3), output: y,
                                                               channelOffset: offset, outputChannels: total, fusedReLU: false),
                                     "\(be.name): offset \(offset) of \(total)") { error in
                    XCTAssertTrue(error is UpdraftError, "\(be.name): \(error)")
                }
            }
        }
    }
}
