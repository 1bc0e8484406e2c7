import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

/// `CPUBackend.upload` copies large arrays on the worker threads: every value lands in its place,
/// on one thread and on several.
final class CPUUploadTests: XCTestCase {
    func testLargeUploadsLandWhole() throws {
        let count = CPUParallel.copyGrain * 5 + 17  // several chunks and a ragged end
        let values = (0..<count).map { Float($0 % 9973) - 0.5 }
        for threads in [1, 3] {
            let cpu = CPUBackend(threads: threads)
            let b = try cpu.makeBuffer(count: count)
            try cpu.upload(values, to: b)
            XCTAssertEqual(try cpu.download(b), values, "\(threads) threads")
        }
        let cpu = CPUBackend(threads: 2)
        XCTAssertThrowsError(try cpu.upload(values, to: try cpu.makeBuffer(count: count - 1)), "a size mismatch still throws")
    }
}
