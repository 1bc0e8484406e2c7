import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

/// `Backend.uploadPixels`, the image batch's trip to the device at a byte a sample: the OpenCL kernel
/// (PoCL), the CPU twin and the protocol's host default against the Double reference, on awkward
/// sizes (odd widths, one and three channels, batches of 1, 5 and 7), with and without a scaler; and
/// bit for bit the float path it replaces (upload the floats, then `channelAffine`) on each backend.
final class BackendPixelUploadTests: XCTestCase {
    /// [N, C, H, W] shapes that no vector width divides.
    let shapes = [Shape(n: 5, c: 3, h: 7, w: 13), Shape(n: 1, c: 1, h: 1, w: 1), Shape(n: 7, c: 1, h: 9, w: 31),
                  Shape(n: 3, c: 3, h: 227, w: 5)]

    func pixels(_ shape: Shape, seed: UInt64) -> [UInt8] {
        var rng = SplitMix64(seed: seed)
        // Both ends of the range first: 0 and 255 must survive the trip.
        return (0..<shape.count).map { i in i == 0 ? 255 : i == 1 ? 0 : UInt8(truncatingIfNeeded: rng.next() >> 56) }
    }

    /// A scaler of the kind models carry: 1/255 or a per-channel mean and deviation folded in.
    func scaler(_ channels: Int) -> (scale: [Float], shift: [Float]) {
        let shift: [Float] = [-0.485 / 0.229, -0.456 / 0.224, -0.406 / 0.225]
        return ([Float](repeating: 0.017124753, count: channels), Array(shift.prefix(channels)))
    }

    func upload(_ be: Backend, _ shape: Shape, _ px: [UInt8], affine: Bool) throws -> [Float] {
        let out = try be.makeBuffer([Float](repeating: -7, count: shape.count))
        let (s, t) = scaler(shape.c)
        let scale = affine ? try be.makeBuffer(s) : nil, shift = affine ? try be.makeBuffer(t) : nil
        try px.withUnsafeBufferPointer { try be.uploadPixels($0, shape: shape, scale: scale, shift: shift, to: out) }
        return try be.download(out)
    }

    /// What the executor did before the op: the samples as floats, uploaded, then `channelAffine`.
    func floatPath(_ be: Backend, _ shape: Shape, _ px: [UInt8], affine: Bool) throws -> [Float] {
        let out = try be.makeBuffer(px.map(Float.init))
        if affine {
            let (s, t) = scaler(shape.c)
            try be.channelAffine(Shape(n: shape.n, c: shape.c, h: shape.h * shape.w, w: 1), input: out,
                                 scale: try be.makeBuffer(s), shift: try be.makeBuffer(t), output: out)
        }
        return try be.download(out)
    }

    func testEveryBackendConvertsLikeTheReferenceAndLikeTheFloatPath() throws {
        let backends: [Backend] = [CPUBackend(threads: 3), OpenCLBackend(context: try OpenCLTestSupport.context()),
                                   FaultyBackend(.poolingGradient)]  // the last has no uploadPixels: the protocol's default
        for (k, shape) in shapes.enumerated() {
            let px = pixels(shape, seed: UInt64(k))
            for affine in [false, true] {
                let (s, t) = scaler(shape.c)
                let reference = try Reference.pixelsToFloat(shape, pixels: px, scale: affine ? s.map(Double.init) : nil,
                                                            shift: affine ? t.map(Double.init) : nil)
                XCTAssertEqual(try upload(ReferenceBackend(), shape, px, affine: affine), reference.map { Float($0) })
                for be in backends {
                    let got = try upload(be, shape, px, affine: affine)
                    XCTAssertEqual(got.count, shape.count)
                    let worst = zip(got, reference).map { abs(Double($0) - $1) / max(1, abs($1)) }.max() ?? 0
                    // Float rounding of one multiply and one add: a few ulps at most; none without a scaler.
                    XCTAssertLessThanOrEqual(worst, affine ? 1e-6 : 0, "\(be.name) \(shape) affine \(affine)")
                    XCTAssertEqual(got.map(\.bitPattern), try floatPath(be, shape, px, affine: affine).map(\.bitPattern),
                                   "\(be.name) \(shape) affine \(affine): bit for bit the float upload and channelAffine")
                }
            }
        }
    }

    func testAnOutputLargerThanTheBatchKeepsItsTail() throws {
        let shape = Shape(n: 2, c: 3, h: 3, w: 5)
        let px = pixels(shape, seed: 9)
        for be in [CPUBackend() as Backend, OpenCLBackend(context: try OpenCLTestSupport.context()), ReferenceBackend()] {
            let out = try be.makeBuffer([Float](repeating: -7, count: shape.count + 3))
            try px.withUnsafeBufferPointer { try be.uploadPixels($0, shape: shape, scale: nil, shift: nil, to: out) }
            let got = try be.download(out)
            XCTAssertEqual(Array(got.prefix(shape.count)), px.map(Float.init), be.name)
            XCTAssertEqual(Array(got.suffix(3)), [-7, -7, -7], be.name)
        }
    }

    func testMismatchedArgumentsThrowNamingTheProblem() throws {
        let shape = Shape(n: 2, c: 3, h: 4, w: 5)
        for be in [CPUBackend() as Backend, OpenCLBackend(context: try OpenCLTestSupport.context()), ReferenceBackend(),
                   FaultyBackend(.poolingGradient)] {
            let out = try be.makeBuffer(count: shape.count), scale = try be.makeBuffer([1, 1, 1])
            let short = [UInt8](repeating: 1, count: shape.count - 1)
            XCTAssertThrowsError(try short.withUnsafeBufferPointer { try be.uploadPixels($0, shape: shape, scale: nil, shift: nil, to: out) }) {
                XCTAssertTrue("\($0)".contains("samples for shape"), "\(be.name): \($0)")
            }
            let px = [UInt8](repeating: 1, count: shape.count)
            XCTAssertThrowsError(try px.withUnsafeBufferPointer { try be.uploadPixels($0, shape: shape, scale: scale, shift: nil, to: out) }) {
                XCTAssertTrue("\($0)".contains("both scale and shift"), "\(be.name): \($0)")
            }
            let small = try be.makeBuffer(count: shape.count - 1)
            XCTAssertThrowsError(try px.withUnsafeBufferPointer { try be.uploadPixels($0, shape: shape, scale: nil, shift: nil, to: small) }) {
                XCTAssertTrue("\($0)".contains("output holds"), "\(be.name): \($0)")
            }
        }
    }
}
