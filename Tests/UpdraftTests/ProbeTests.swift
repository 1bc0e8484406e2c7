import XCTest
@testable import Updraft

final class ProbeTests: XCTestCase {
    func testCompileTimes() throws {
        let shared = try OpenCLTestSupport.context()
        for opts in ["-cl-std=CL1.2", "-cl-std=CL1.2 -cl-opt-disable"] {
        let ctx = try OpenCLContext(device: shared.device)
        ctx.baseBuildOptions = opts
        let tilings: [(String, GemmTiling)] = [
            ("tiny", .tiny), ("small", .small),
            ("small-v1", GemmTiling(tileM: 32, tileN: 32, tileK: 16, workM: 4, workN: 4, vectorM: 1, vectorN: 1)),
            ("minimal", .minimal), ("large", .large)]
        for (label, t) in tilings {
            var tuning = OpenCLTuning.cpu
            tuning.gemmTilings = [t]
            let cl = OpenCLBackend(context: ctx, tuning: tuning)
            let a = try cl.makeBuffer(count: 100 * 100)
            let t0 = Date()
            try cl.sgemm(GemmOperation(m: 33, n: 33, k: 33), a: a, b: a, c: try cl.makeBuffer(count: 2000))
            try cl.synchronize()
            let t1 = Date()
            try cl.sgemm(GemmOperation(m: 33, n: 33, k: 33), a: a, b: a, c: try cl.makeBuffer(count: 2000))
            try cl.synchronize()
            print("PROBE", opts, label, t1.timeIntervalSince(t0), Date().timeIntervalSince(t1))
        }
        }
    }
}
