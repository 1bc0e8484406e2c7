import XCTest
@testable import Updraft

final class OpenCLGemmTests: XCTestCase {
    func testSmoke() throws {
        let ctx = try OpenCLTestSupport.context()
        let backend = OpenCLBackend(context: ctx)
        var rng = SplitMix64(seed: 1)
        let (m, n, k) = (33, 65, 31)
        let a = (0..<(m * k)).map { _ in Float(rng.nextDouble() * 2 - 1) }
        let b = (0..<(k * n)).map { _ in Float(rng.nextDouble() * 2 - 1) }
        let t0 = Date()
        let A = try backend.makeBuffer(a), B = try backend.makeBuffer(b), C = try backend.makeBuffer(count: m * n)
        try backend.sgemm(GemmOperation(m: m, n: n, k: k), a: A, b: B, c: C)
        let c = try backend.download(C)
        print("first gemm", Date().timeIntervalSince(t0))
        var maxErr = 0.0
        for i in 0..<m { for j in 0..<n {
            var s = 0.0
            for p in 0..<k { s += Double(a[i * k + p]) * Double(b[p * n + j]) }
            maxErr = max(maxErr, abs(s - Double(c[i * n + j])))
        } }
        XCTAssertLessThan(maxErr, 1e-4)
    }
}
