import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

/// The OpenCL SGEMM (Kernels/gemm.cl) against a plain Double loop, on sizes that are not multiples of
/// any tile, every transpose, alpha/beta, bias and ReLU epilogues, strided batches, split-K, and every
/// tiling of the tuning tables (the NVIDIA ones included: PoCL runs them too, slowly).
final class OpenCLGemmTests: XCTestCase {
    private func backend(_ tilings: [GemmTiling]? = nil) throws -> OpenCLBackend {
        try GemmTestSupport.backend(tilings)
    }

    /// C = alpha op(A) op(B) + beta C0 (+ bias) (ReLU) in Double, per matrix of the batch.
    private func expected(_ op: GemmOperation, _ a: [Float], _ b: [Float], _ c0: [Float], _ bias: [Float]) -> [Double] {
        var c = c0.map(Double.init)
        for z in 0..<op.batch {
            for i in 0..<op.m {
                for j in 0..<op.n {
                    var s = 0.0
                    for p in 0..<op.k {
                        let av = op.transA ? a[op.offsetA + z * op.strideA + p * op.lda + i] : a[op.offsetA + z * op.strideA + i * op.lda + p]
                        let bv = op.transB ? b[op.offsetB + z * op.strideB + j * op.ldb + p] : b[op.offsetB + z * op.strideB + p * op.ldb + j]
                        s += Double(av) * Double(bv)
                    }
                    let ci = op.offsetC + z * op.strideC + i * op.ldc + j
                    var v = Double(op.alpha) * s + (op.beta == 0 ? 0 : Double(op.beta) * Double(c0[ci]))
                    if op.bias == .perRow { v += Double(bias[i]) }
                    if op.bias == .perColumn { v += Double(bias[j]) }
                    c[ci] = op.relu ? max(0, v) : v
                }
            }
        }
        return c
    }

    /// Runs `op` on `backend` with random operands (C pre-filled, so untouched elements are checked too).
    private func check(_ op: GemmOperation, on backend: OpenCLBackend, seed: UInt64 = 1,
                       file: StaticString = #filePath, line: UInt = #line) throws {
        var rng = SplitMix64(seed: seed)
        func random(_ n: Int) -> [Float] { (0..<n).map { _ in rng.nextFloat(in: -1...1) } }
        let e = op.extents
        let a = random(e.a + 3), b = random(e.b + 2), c0 = random(e.c + 5), bias = random(max(op.m, op.n))
        let C = try backend.makeBuffer(c0)
        try backend.sgemm(op, a: try backend.makeBuffer(a), b: try backend.makeBuffer(b), c: C,
                          bias: op.bias == .none ? nil : try backend.makeBuffer(bias))
        let got = try backend.download(C)
        let want = expected(op, a, b, c0, bias)
        assertClose(got, want, tolerance: 2e-6 * Double(max(op.k, 1)) + 1e-5, "\(op.m)x\(op.n)x\(op.k) \(op)", file: file, line: line)
    }

    func testAwkwardSizesAndTransposes() throws {
        let cl = try backend()
        let sizes = [(1, 1, 1), (7, 31, 33), (32, 32, 32), (33, 63, 65), (65, 7, 129), (129, 33, 7)]
        for (i, (m, n, k)) in sizes.enumerated() {
            for transA in [false, true] {
                for transB in [false, true] {
                    try check(GemmOperation(m: m, n: n, k: k, transA: transA, transB: transB), on: cl, seed: UInt64(i))
                }
            }
        }
    }

    func testAlphaBetaBiasReluAndLeadingDimensions() throws {
        let cl = try backend()
        var op = GemmOperation(m: 31, n: 33, k: 17, transB: true)
        op.alpha = 0.5; op.beta = -2; op.bias = .perRow; op.relu = true
        try check(op, on: cl)
        op.bias = .perColumn; op.relu = false; op.beta = 0
        op.lda = 20; op.ldb = 19; op.ldc = 40; op.offsetA = 3; op.offsetB = 1; op.offsetC = 7
        try check(op, on: cl)
    }

    func testStridedBatch() throws {
        let cl = try backend()
        var op = GemmOperation(m: 7, n: 9, k: 65, transA: true, batch: 3)
        op.strideB = 0                    // B shared by every matrix, as convolution weights are
        op.strideC = 7 * 9 + 4            // gaps between the C matrices stay untouched
        try check(op, on: cl)
    }

    func testSplitKIsSummedInOrder() throws {
        let cl = try backend()
        cl.gemmWorkspace.forcedSplits = 3
        try check(GemmOperation(m: 5, n: 33, k: 129, transA: true), on: cl)
        var batched = GemmOperation(m: 4, n: 6, k: 100, batch: 2)
        batched.ldc = 8; batched.strideC = 40
        try check(batched, on: cl)
        // Deterministic: the same sums in the same order, bit for bit.
        var rng = SplitMix64(seed: 9)
        let a = try cl.makeBuffer((0..<(64 * 300)).map { _ in rng.nextFloat(in: -1...1) })
        let b = try cl.makeBuffer((0..<(300 * 20)).map { _ in rng.nextFloat(in: -1...1) })
        let c = try cl.makeBuffer(count: 64 * 20)
        let op = GemmOperation(m: 64, n: 20, k: 300)
        try cl.sgemm(op, a: a, b: b, c: c)
        let first = try cl.download(c)
        try cl.sgemm(op, a: a, b: b, c: c)
        XCTAssertEqual(first, try cl.download(c))
    }

    /// Every tiling of the tables, on a size with partial tiles in every direction (the exact-size
    /// variant is covered by the 32x32x32 case above), loading along K or along M/N by turns.
    func testEveryTiling() throws {
        let all: [GemmTiling] = [.large, .wide64, .wide32, .wide16, .thin8, .medium, .small, .tiny, .minimal]
        for (i, t) in all.enumerated() {
            XCTAssertTrue(t.isWellFormed, "\(t)")
            let alongK = i % 2 == 0
            try check(GemmOperation(m: 2 * t.tileM - 3, n: t.tileN + 5, k: 2 * t.tileK + 1, transA: !alongK, transB: alongK),
                      on: try backend([t]))
        }
    }

    func testTuningTableAndChoice() throws {
        let h200 = OpenCLDeviceInfo(platformName: "NVIDIA CUDA", platformVersion: "OpenCL 3.0 CUDA 13.0", name: "NVIDIA H200",
                                    vendor: "NVIDIA Corporation", type: .gpu, computeUnits: 132, clockMHz: 1980,
                                    globalMemory: 150 << 30, localMemory: 48 << 10, maxAllocation: 35 << 30,
                                    maxWorkGroupSize: 1024, maxWorkItemSizes: [1024, 1024, 64], openCLCVersion: "OpenCL C 1.2",
                                    driverVersion: "580", extensions: [], index: 0)
        let t = OpenCLTuning.forDevice(h200)
        XCTAssertEqual(t.gemmTilings.first, .large)
        XCTAssertEqual(t.computeUnits, 132)
        // conv10 (M=1000, N=169*64) takes the big tiles; a 16-channel squeeze layer the thin ones.
        XCTAssertEqual(t.gemmTiling(rows: 1000, columns: 169 * 64), .large)
        XCTAssertLessThanOrEqual(t.gemmTiling(rows: 16, columns: 3025 * 64).tileM, 32)
        XCTAssertEqual(t.gemmTiling(rows: 3, columns: 227 * 227 * 64), .thin8)
        XCTAssertEqual(t.gemmTiling(rows: 4096, columns: 4096), .large)
        // A device with little local memory and small work-groups keeps only what it can run.
        var weak = h200
        weak.localMemory = 8 << 10; weak.maxWorkGroupSize = 64; weak.maxWorkItemSizes = [64, 64, 64]
        let clamped = OpenCLTuning.forDevice(weak)
        XCTAssertFalse(clamped.gemmTilings.isEmpty)
        XCTAssertTrue(clamped.gemmTilings.allSatisfy { $0.threads <= 64 && $0.localMemoryBytes + 1024 <= 8 << 10 })
        XCTAssertFalse(GemmTiling(tileM: 128, tileN: 128, tileK: 16, workM: 8, workN: 8, vectorM: 3, vectorN: 4).isWellFormed)
        XCTAssertFalse(GemmTiling(tileM: 128, tileN: 32, tileK: 16, workM: 8, workN: 8, vectorM: 4, vectorN: 4).isWellFormed)
    }

    func testBadOperandsAreRejected() throws {
        let cl = try backend()
        let small = try cl.makeBuffer(count: 10)
        XCTAssertThrowsError(try cl.sgemm(GemmOperation(m: 4, n: 4, k: 4), a: small, b: small, c: small)) { error in
            XCTAssertTrue("\(error)".contains("reads 16 floats of A"), "\(error)")
        }
        var op = GemmOperation(m: 2, n: 2, k: 2)
        op.lda = 1
        XCTAssertThrowsError(try cl.sgemm(op, a: small, b: small, c: small))
        op = GemmOperation(m: 2, n: 2, k: 2); op.bias = .perRow
        XCTAssertThrowsError(try cl.sgemm(op, a: small, b: small, c: small, bias: nil))
    }
}
