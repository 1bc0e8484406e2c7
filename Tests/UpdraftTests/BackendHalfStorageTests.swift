import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

/// The half-storage forward kernels of the frozen prefix's fp16 option (Kernels/storage.h:
/// convolution.cl and pooling.cl built with -D X_HALF / -D Y_HALF) against their CPU twin: the fp32
/// op on the inputs' half values, each output rounded to nearest even (Swift's Float16), on awkward
/// sizes, channel slices of a wider output, and every combination of half input and half output.
final class BackendHalfStorageTests: XCTestCase {
    /// `values` as a half buffer (rounded to nearest even, through the tested `copyRows(…, toHalf:)`).
    func halfBuffer(_ be: Backend, _ values: [Float]) throws -> DeviceBuffer {
        let floats = try be.makeBuffer(values), half = try be.makeBuffer(count: HalfStorage.floats(for: values.count, half: true))
        try be.copyRows(floats, rows: [0], to: half, rows: [0], rowLength: values.count, toHalf: true)
        return half
    }

    /// The `count` values of a half buffer, as floats.
    func readHalf(_ be: Backend, _ buffer: DeviceBuffer, count: Int) throws -> [Float] {
        let floats = try be.makeBuffer(count: count)
        try be.copyRows(buffer, rows: [0], to: floats, rows: [0], rowLength: count, toHalf: false)
        return try be.download(floats)
    }

    func rounded(_ values: [Float]) -> [Float] { values.map { Float(Float16($0)) } }

    /// Within one half ulp of the twin (the two fp32 sums may round to neighbouring halves), and
    /// exactly half-representable (the output really went through a half).
    func assertHalfClose(_ got: [Float], _ want: [Float], _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(got.count, want.count, what, file: file, line: line)
        var worst: Float = 0
        for (g, w) in zip(got, want) {
            XCTAssertEqual(g, Float(Float16(g)), "\(what): \(g) is not a half value", file: file, line: line)
            let ulp = max(Float(Float16(w).ulp), Float(Float16.leastNormalMagnitude.ulp))
            worst = max(worst, abs(g - w) / ulp)
        }
        XCTAssertLessThanOrEqual(worst, 1, "\(what): off by \(worst) half ulps", file: file, line: line)
    }

    func testConvolutionKernelsMatchTheCPUTwin() throws {
        let cl = OpenCLBackend(context: try OpenCLTestSupport.context())
        let cpu = CPUBackend()
        let cases: [(ConvolutionSpec, Shape, Activation?)] = [
            (ConvolutionSpec(inputChannels: 5, outputChannels: 7, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2,
                             padding: .valid(top: 1, bottom: 0, left: 1, right: 2)), [3, 5, 9, 11], .relu),
            (ConvolutionSpec(inputChannels: 13, outputChannels: 6, kernelH: 1, kernelW: 1), [2, 13, 5, 7], nil),   // pointwise
            (ConvolutionSpec(inputChannels: 3, outputChannels: 5, kernelH: 3, kernelW: 3, padding: .valid(top: 1, bottom: 1, left: 1, right: 1)),
             [1, 3, 1, 9], .relu),
        ]
        for (spec, input, epilogue) in cases {
            let g = try spec.geometry(input: input)
            let x = (0..<g.inputShape.count).map { Float(sin(Double($0) * 0.37)) * 3 }
            let w = (0..<g.weightShape.count).map { Float(cos(Double($0) * 0.11)) * 0.5 }
            let b = (0..<g.outChannels).map { Float($0) * 0.25 - 0.5 }
            // The twin: the fp32 op on the half inputs, into channels [2, 2 + Cout) of Cout + 3 channels.
            let (offset, total) = (2, g.outChannels + 3)
            let plane = g.outHeight * g.outWidth, outCount = g.batch * total * plane
            func twin(halfInput: Bool) throws -> [Float] {
                let y = try cpu.makeBuffer(count: outCount)
                try cpu.fill(y, with: 0)
                try cpu.convolutionForward(g, input: try cpu.makeBuffer(halfInput ? rounded(x) : x), weights: try cpu.makeBuffer(w),
                                           bias: try cpu.makeBuffer(b), output: y, channelOffset: offset, outputChannels: total,
                                           epilogue: epilogue)
                return try cpu.download(y)
            }
            // Every combination on the first geometry, halves on both sides on the others (each is a program to build).
            let storages = spec.strideH == 2 ? [HalfStorage(input: true, output: true), HalfStorage(input: false, output: true),
                                                HalfStorage(input: true, output: false)] : [HalfStorage(input: true, output: true)]
            for storage in storages {
                let what = "\(g.inputShape) -> \(g.outChannels) (\(spec.kernelH)x\(spec.kernelW)), \(storage)"
                let xb = storage.input ? try halfBuffer(cl, x) : try cl.makeBuffer(x)
                let yb = storage.output ? try halfBuffer(cl, [Float](repeating: 0, count: outCount))
                                        : try cl.makeBuffer([Float](repeating: 0, count: outCount))
                let ran = try cl.convolutionForward(g, input: xb, weights: try cl.makeBuffer(w), bias: try cl.makeBuffer(b),
                                                    output: yb, channelOffset: offset, outputChannels: total, epilogue: epilogue,
                                                    storage: storage)
                XCTAssertTrue(ran, "\(what): OpenCL has a half kernel for dense convolutions")
                let got = storage.output ? try readHalf(cl, yb, count: outCount) : try cl.download(yb)
                let want = try twin(halfInput: storage.input)
                if storage.output {
                    assertHalfClose(got, rounded(want), what)
                } else {
                    assertClose(got, want.map(Double.init), tolerance: 1e-4, what)
                }
                // The channels outside the slice are untouched.
                for n in 0..<g.batch {
                    for c in 0..<total where c < offset || c >= offset + g.outChannels {
                        XCTAssertTrue(got[(n * total + c) * plane..<(n * total + c + 1) * plane].allSatisfy { $0 == 0 }, what)
                    }
                }
            }
        }
    }

    func testPoolingKernelsMatchTheCPUTwin() throws {
        let cl = OpenCLBackend(context: try OpenCLTestSupport.context())
        let cpu = CPUBackend()
        let specs = [PoolingSpec(kind: .max, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2, padding: .includeLastPixel(height: 0, width: 0)),
                     PoolingSpec(kind: .average, kernelH: 3, kernelW: 2, strideH: 2, strideW: 1,
                                 padding: .valid(top: 1, bottom: 1, left: 0, right: 1), excludePadding: false)]
        for spec in specs {
            let g = try spec.geometry(input: [3, 5, 9, 7])
            let x = (0..<g.inputShape.count).map { Float(sin(Double($0) * 0.73)) * 100 }
            for storage in [HalfStorage(input: true, output: true), HalfStorage(input: false, output: true),
                            HalfStorage(input: true, output: false)] {
                let what = "\(spec.kind) pooling, \(storage)"
                let y = try cpu.makeBuffer(count: g.outputShape.count)
                try cpu.poolingForward(g, input: try cpu.makeBuffer(storage.input ? rounded(x) : x), output: y)
                let want = try cpu.download(y)
                let xb = storage.input ? try halfBuffer(cl, x) : try cl.makeBuffer(x)
                let yb = try cl.makeBuffer(count: HalfStorage.floats(for: g.outputShape.count, half: storage.output))
                XCTAssertTrue(try cl.poolingForward(g, input: xb, output: yb, storage: storage), what)
                let got = storage.output ? try readHalf(cl, yb, count: g.outputShape.count) : try cl.download(yb)
                if storage.output { assertHalfClose(got, rounded(want), what) } else { assertClose(got, want.map(Double.init), tolerance: 1e-4, what) }
            }
            // Global pooling has no half kernel: the executor converts around it.
            let global = try PoolingSpec(kind: .max, global: true).geometry(input: [1, 2, 3, 3])
            XCTAssertFalse(try cl.poolingForward(global, input: try cl.makeBuffer(count: 9), output: try cl.makeBuffer(count: 1),
                                                 storage: HalfStorage(input: true, output: true)))
        }
        // The CPU backend has no half kernels: the executor's conversions are its twin.
        let g = try PoolingSpec(kind: .max).geometry(input: [1, 1, 4, 4])
        XCTAssertFalse(try cpu.poolingForward(g, input: try cpu.makeBuffer(count: 8), output: try cpu.makeBuffer(count: 2),
                                              storage: HalfStorage(input: true, output: true)))
    }

    /// Half buffers are sized in halves: one float short is refused with a named error, not read past.
    func testShortHalfBuffersThrow() throws {
        let cl = OpenCLBackend(context: try OpenCLTestSupport.context())
        let g = try ConvolutionSpec(inputChannels: 3, outputChannels: 2, kernelH: 1, kernelW: 1).geometry(input: [1, 3, 3, 3])
        let w = try cl.makeBuffer(count: 6)
        XCTAssertThrowsError(try cl.convolutionForward(g, input: try cl.makeBuffer(count: 13), weights: w, bias: try cl.makeBuffer(count: 2),
                                                       output: try cl.makeBuffer(count: 9), channelOffset: 0, outputChannels: 2,
                                                       epilogue: nil, storage: HalfStorage(input: true, output: true))) {
            XCTAssertTrue($0 is UpdraftError, "\($0)")
        }
        let p = try PoolingSpec(kind: .max).geometry(input: [1, 1, 4, 4])
        XCTAssertThrowsError(try cl.poolingForward(p, input: try cl.makeBuffer(count: 7), output: try cl.makeBuffer(count: 2),
                                                   storage: HalfStorage(input: true, output: true))) {
            XCTAssertTrue($0 is UpdraftError, "\($0)")
        }
    }
}
