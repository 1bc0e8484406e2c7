import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftLayers

/// A large request with no free buffer of its size takes a view of a larger free CPU buffer; the
/// memory goes back as that buffer, and never to two holders at once.
final class WorkspaceSharingTests: XCTestCase {
    private func cpuPointer(_ b: DeviceBuffer) -> UnsafeMutablePointer<Float> { (b as! CPUBuffer).pointer }

    func testLargeRequestTakesAViewOfALargerFreeBuffer() throws {
        let cpu = CPUBackend()
        let ws = Workspace(batch: 1)
        let big = Workspace.sharedFrom * 3
        let base = try ws.acquire(big, on: cpu)
        try cpu.fill(base, with: 7)
        ws.release(base, from: cpu)

        let small = Workspace.sharedFrom + 5
        let view = try ws.acquire(small, on: cpu)
        XCTAssertFalse(view === base)
        XCTAssertEqual(view.count, small, "the view has the size asked for (uploads and downloads use it)")
        XCTAssertEqual(cpuPointer(view), cpuPointer(base), "the view is the free buffer's memory, not new memory")
        XCTAssertEqual(try cpu.download(view).prefix(3), [7, 7, 7], "a reused buffer keeps its contents (like any pooled one)")

        // While the view is out, its buffer is not free: another request gets other memory.
        let other = try ws.acquire(small, on: cpu)
        XCTAssertNotEqual(cpuPointer(other), cpuPointer(base))
        XCTAssertEqual(try cpu.download(other).prefix(3), [0, 0, 0], "new memory")

        // Releasing the view gives back the buffer under it, whole.
        ws.release(view, from: cpu)
        XCTAssertTrue(try ws.acquire(big, on: cpu) === base)
        // The exact-size buffer released earlier is taken before any view.
        ws.release(other, from: cpu)
        XCTAssertTrue(try ws.acquire(small, on: cpu) === other)
    }

    func testSmallRequestsAndMuchLargerBuffersAreNotShared() throws {
        let cpu = CPUBackend()
        let ws = Workspace(batch: 1)
        // Small requests stay on their own sizes (the allocator's memory, identity kept).
        let a = try ws.acquire(1000, on: cpu)
        ws.release(a, from: cpu)
        XCTAssertFalse(cpuPointer(try ws.acquire(500, on: cpu)) == cpuPointer(a))
        // A buffer more than `sharedRatio` times the request stays free for a large blob.
        let huge = try ws.acquire(Workspace.sharedFrom * (Workspace.sharedRatio + 1), on: cpu)
        ws.release(huge, from: cpu)
        let request = try ws.acquire(Workspace.sharedFrom, on: cpu)
        XCTAssertNotEqual(cpuPointer(request), cpuPointer(huge))
        // Of two larger free buffers the smaller is taken.
        let fresh = Workspace(batch: 1)
        let larger = try fresh.acquire(Workspace.sharedFrom * 4, on: cpu)
        let smaller = try fresh.acquire(Workspace.sharedFrom * 2, on: cpu)
        fresh.release(larger, from: cpu)
        fresh.release(smaller, from: cpu)
        XCTAssertEqual(cpuPointer(try fresh.acquire(Workspace.sharedFrom + 1, on: cpu)), cpuPointer(smaller))
        XCTAssertEqual(cpuPointer(try fresh.acquire(Workspace.sharedFrom + 1, on: cpu)), cpuPointer(larger))
    }

    func testValuesHeldAsViewsGoBackThroughClearValues() throws {
        let cpu = CPUBackend()
        let ws = Workspace(batch: 1)
        let base = try ws.acquire(Workspace.sharedFrom * 2, on: cpu)
        ws.release(base, from: cpu)
        let view = try ws.acquire(Workspace.sharedFrom, on: cpu)
        ws.setValue("x", view, on: cpu)
        ws.setValue("y", view, on: cpu)  // an alias: both blobs hold the view
        ws.dropValue("x")
        // Still held by "y": the buffer under it is not free.
        XCTAssertNotEqual(cpuPointer(try ws.acquire(Workspace.sharedFrom * 2, on: cpu)), cpuPointer(base))
        ws.clearValues()
        XCTAssertTrue(try ws.acquire(Workspace.sharedFrom * 2, on: cpu) === base)
    }
}
