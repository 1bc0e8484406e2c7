import XCTest
@testable import UpdraftBackends

final class OpenCLRuntimeTests: XCTestCase {
    func testDevicesAreListed() throws {
        let ctx = try OpenCLTestSupport.context()
        let info = ctx.device.info
        XCTAssertFalse(info.name.isEmpty)
        XCTAssertGreaterThan(info.computeUnits, 0)
        XCTAssertGreaterThan(info.globalMemory, 0)
        XCTAssertGreaterThan(info.maxWorkGroupSize, 0)
        XCTAssertTrue(info.openCLCVersion.hasPrefix("OpenCL C"), info.openCLCVersion)
    }

    func testBufferRoundTrip() throws {
        let ctx = try OpenCLTestSupport.context()
        let values = (0..<1000).map { Float($0) * 0.5 - 7 }
        let b = try ctx.makeBuffer(values)
        XCTAssertEqual(try ctx.read(b), values)
        XCTAssertEqual(try ctx.read(b, count: 3, offset: 10), [-2, -1.5, -1])
        try ctx.fill(b, with: 2.5)
        XCTAssertEqual(try ctx.read(b), [Float](repeating: 2.5, count: 1000))
        let c = try ctx.makeBuffer(count: 1000)
        try ctx.copy(try ctx.makeBuffer(values), to: c)
        XCTAssertEqual(try ctx.read(c), values)
        XCTAssertThrowsError(try ctx.read(b, count: 10, offset: 995))
    }

    func testKernelLaunchWithTypedArguments() throws {
        let ctx = try OpenCLTestSupport.context()
        let source = """
        __kernel void axpb(__global float* y, __global const float* x, float a, int n) {
            int i = get_global_id(0);
            if (i < n) y[i] = a * x[i] + OFFSET;
        }
        """
        let program = try ctx.program(source: source, named: "axpb", defines: ["OFFSET": "3.0f"])
        let k = try program.kernel("axpb")
        let x = try ctx.makeBuffer((0..<37).map(Float.init))
        let y = try ctx.makeBuffer(count: 37)
        try k.setArguments([.buffer(y), .buffer(x), .float(2), .int(37)])
        let event = try k.launch(global: [37], local: [16], profile: true)
        XCTAssertGreaterThanOrEqual(try event!.elapsedSeconds(), 0)
        XCTAssertEqual(try ctx.read(y), (0..<37).map { 2 * Float($0) + 3 })
        // Same source and defines: the cached program comes back; other defines build another one.
        XCTAssertTrue(program === (try ctx.program(source: source, named: "axpb", defines: ["OFFSET": "3.0f"])))
        XCTAssertFalse(program === (try ctx.program(source: source, named: "axpb", defines: ["OFFSET": "1.0f"])))
    }

    func testBuildErrorCarriesStatusNameAndLog() throws {
        let ctx = try OpenCLTestSupport.context()
        let broken = "__kernel void broken(__global float* y) { y[0] = undefined_name_xyz; }"
        XCTAssertThrowsError(try ctx.program(source: broken, named: "broken")) { error in
            guard let e = error as? OpenCLError else { return XCTFail("expected OpenCLError, got \(error)") }
            XCTAssertEqual(e.statusName, "CL_BUILD_PROGRAM_FAILURE")
            XCTAssertTrue(e.buildLog?.contains("undefined_name_xyz") ?? false, "log: \(e.buildLog ?? "none")")
            XCTAssertTrue(e.description.contains("CL_BUILD_PROGRAM_FAILURE"))
        }
    }

    func testUnknownKernelNameIsNamed() throws {
        let ctx = try OpenCLTestSupport.context()
        let p = try ctx.program(source: "__kernel void a(__global float* y) { y[0] = 1.0f; }", named: "a")
        XCTAssertThrowsError(try p.kernel("nope")) { error in
            XCTAssertEqual((error as? OpenCLError)?.statusName, "CL_INVALID_KERNEL_NAME")
            XCTAssertTrue("\(error)".contains("nope"))
        }
    }

    func testEmbeddedKernelsAndIncludes() throws {
        XCTAssertNotNil(EmbeddedKernels.sources["common.h"], "Kernels/ are embedded at build time")
        let resolved = try OpenCLContext.resolveIncludes("#include \"common.h\"\nint x;", file: "t.cl")
        XCTAssertTrue(resolved.contains("UPDRAFT_COMMON_H"))
        XCTAssertThrowsError(try OpenCLContext.resolveIncludes("#include \"missing.h\"", file: "t.cl"))
    }

    func testStatusNames() {
        XCTAssertEqual(openCLStatusName(-5), "CL_OUT_OF_RESOURCES")
        XCTAssertEqual(openCLStatusName(-54), "CL_INVALID_WORK_GROUP_SIZE")
        XCTAssertEqual(openCLStatusName(-9999), "CL_ERROR_-9999")
        XCTAssertNotNil(OpenCLError(-4, "clCreateBuffer").hint)
    }
}

/// Transfers that do not wait for the queue: a deferred read sees the buffer as it was when the read
/// was queued, whatever is queued after it, and a read nobody waits for is cleaned up safely; a small
/// upload takes effect in queue order (after the work queued before it, before the work after).
final class OpenCLDeferredReadTests: XCTestCase {
    func testSmallUploadsTakeEffectInQueueOrder() throws {
        let backend = OpenCLBackend(context: try OpenCLTestSupport.context())
        for count in [1, 3, 1000, OpenCLBackend.stagedUploadLimit, OpenCLBackend.stagedUploadLimit + 1] {
            let old = (0..<count).map { Float($0) }, new = (0..<count).map { Float(-$0 - 1) }
            let b = try backend.makeBuffer(old), before = try backend.makeBuffer(count: count), after = try backend.makeBuffer(count: count)
            try backend.copy(b, to: before)
            try backend.upload(new, to: b)
            try backend.copy(b, to: after)
            XCTAssertEqual(try backend.download(before), old, "\(count): queued before the upload")
            XCTAssertEqual(try backend.download(after), new, "\(count): queued after the upload")
        }
        for _ in 0..<200 { try backend.upload([1, 2], to: try backend.makeBuffer(count: 2)) }
        try backend.synchronize()
    }

    func testDeferredReadSeesTheBufferAsQueued() throws {
        let backend = OpenCLBackend(context: try OpenCLTestSupport.context())
        let values = (0..<1000).map { Float($0) * 0.5 }
        let buffer = try backend.makeBuffer(values)
        let pending = try backend.downloadLater(buffer)
        try backend.fill(buffer, with: -1)
        let dropped = try backend.downloadLater(buffer)
        _ = dropped  // never waited for
        XCTAssertEqual(try pending.values(), values)
        XCTAssertEqual(try pending.values(), values, "a second call returns the same values")
        XCTAssertEqual(try backend.downloadLater(buffer).values(), Array(repeating: -1, count: 1000))
        XCTAssertEqual(try backend.downloadLater(try backend.makeBuffer(count: 0)).values(), [])
        XCTAssertEqual(try CPUBackend().downloadLater(try CPUBackend().makeBuffer([3, 4])).values(), [3, 4])
    }
}
