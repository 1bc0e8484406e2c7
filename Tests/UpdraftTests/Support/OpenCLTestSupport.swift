import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

/// The OpenCL context tests run on: the first device (PoCL in CI). OpenCL tests must really run in CI,
/// so a missing device fails them, unless UPDRAFT_ALLOW_NO_OPENCL=1 says this machine has none on purpose.
enum OpenCLTestSupport {
    /// Created once, on first use; XCTest runs the tests that use it one after another.
    private static let shared: Result<OpenCLContext, Error> = Result { () throws -> OpenCLContext in
        let devices = try OpenCLRuntime.devices()
        let wanted = ProcessInfo.processInfo.environment["UPDRAFT_TEST_DEVICE"].flatMap(Int.init) ?? 0
        guard let device = devices.first(where: { $0.info.index == wanted }) ?? devices.first else {
            throw UpdraftError(.device, "no OpenCL device", hint: "install pocl-opencl-icd (make deps does)")
        }
        return try OpenCLContext(device: device)
    }

    /// The shared context, or nil after recording why (a failure, or a skip when allowed).
    static func context(file: StaticString = #filePath, line: UInt = #line) throws -> OpenCLContext {
        switch shared {
        case let .success(ctx): return ctx
        case let .failure(error):
            if ProcessInfo.processInfo.environment["UPDRAFT_ALLOW_NO_OPENCL"] == "1" {
                throw XCTSkip("no OpenCL device: \(error)")
            }
            XCTFail("OpenCL tests need a device (PoCL in CI): \(error)", file: file, line: line)
            throw error
        }
    }
}
