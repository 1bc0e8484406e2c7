import XCTest
@testable import UpdraftCore
@testable import UpdraftPlacement

/// One placement path, typed (issue 36): a device asked for from Swift stays a `DevicePin` from the
/// configuration to the plan, text (`--device`, `UPDRAFT_DEVICE`) is resolved once, and a typed
/// data-parallel mode is never spelled out and parsed again.
final class DeviceRequestTests: XCTestCase {
    func testTheOptionWinsOverATypedPinWhichWinsOverTheEnvironment() {
        let env = [DevicePin.environmentVariable: "1"]
        XCTAssertEqual(DevicePin.request(option: "cpu", pin: .openCL(index: 0), environment: env),
                       DeviceRequest(.text("cpu"), source: "--device"))
        XCTAssertEqual(DevicePin.request(option: nil, pin: .openCL(index: 0), environment: env),
                       DeviceRequest(.pin(.openCL(index: 0)), source: "preferredDevice"))
        XCTAssertEqual(DevicePin.request(option: "", pin: nil, environment: env), DeviceRequest(.text("1"), source: "UPDRAFT_DEVICE"))
        XCTAssertNil(DevicePin.request(option: nil, pin: nil, environment: [:]))
    }

    func testATypedPinIsCheckedAgainstTheDevicesPresentAndRefusedByName() throws {
        let devices = [(index: 0, name: "pthread-cpu"), (index: 2, name: "NVIDIA H200")]
        XCTAssertEqual(try DeviceRequest(.pin(.openCL(index: 2)), source: "preferredDevice").resolve(openCLDevices: devices),
                       .openCL(index: 2))
        XCTAssertEqual(try DeviceRequest(.pin(.host), source: "preferredDevice").resolve(openCLDevices: []), .host)
        XCTAssertThrowsError(try DeviceRequest(.pin(.openCL(index: 7)), source: "preferredDevice").resolve(openCLDevices: devices)) {
            let message = "\($0)"
            XCTAssertTrue(message.contains("preferredDevice names OpenCL device #7, which does not exist"), message)
            XCTAssertTrue(message.contains("2 (NVIDIA H200)"), "the devices present are listed: \(message)")
        }
        XCTAssertEqual(try DeviceRequest(.text("h200"), source: "--device").resolve(openCLDevices: devices), .openCL(index: 2))
    }

    func testATypedDataParallelModeIsTakenAsGiven() throws {
        XCTAssertEqual(try DataParallelMode.resolve(.off, environment: ["UPDRAFT_DATA_PARALLEL": "on"]), .off)
        XCTAssertEqual(try DataParallelMode.resolve(nil, environment: ["UPDRAFT_DATA_PARALLEL": "on"]), .on)
        XCTAssertEqual(try DataParallelMode.resolve(nil, environment: [:]), .auto)
        XCTAssertThrowsError(try DataParallelMode.resolve(nil, environment: ["UPDRAFT_DATA_PARALLEL": "sometimes"]))
    }
}
