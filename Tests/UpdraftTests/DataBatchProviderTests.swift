import XCTest
@testable import UpdraftCore
@testable import UpdraftData
@testable import UpdraftTraining

final class DataBatchProviderTests: XCTestCase {
    func testArrayProviderAndBatching() throws {
        let inputs = (0..<3).map { i in Tensor(shape: [1, 2, 2], data: (0..<4).map { Float(10 * i + $0) }) }
        let provider = try ArrayBatchProvider(inputs: inputs, targets: [.classIndex(2), .classIndex(0), .classIndex(1)])
        XCTAssertEqual(provider.count, 3)
        XCTAssertEqual(try provider.example(at: 1).input, inputs[1])
        XCTAssertThrowsError(try provider.example(at: 3))
        XCTAssertThrowsError(try provider.example(at: -1))

        let batch = try provider.batch(at: [2, 0])
        XCTAssertEqual(batch.inputs.shape, [2, 1, 2, 2])
        XCTAssertEqual(batch.inputs.data, inputs[2].data + inputs[0].data)
        XCTAssertEqual(batch.classIndices, [1, 2])
        XCTAssertThrowsError(try provider.batch(at: [Int]()))
    }

    func testValueTargetsHaveNoClassIndices() throws {
        let provider = try ArrayBatchProvider(inputs: [Tensor(zeros: [2])],
                                              targets: [.values(Tensor(shape: [1], data: [0.5]))])
        XCTAssertNil(try provider.batch(at: [0]).classIndices)
    }

    func testMismatchedInputsAreRejected() {
        XCTAssertThrowsError(try ArrayBatchProvider(inputs: [Tensor(zeros: [2])], targets: []))
        XCTAssertThrowsError(try ArrayBatchProvider(inputs: [Tensor(zeros: [2]), Tensor(zeros: [3])],
                                                    targets: [.classIndex(0), .classIndex(1)])) { error in
            XCTAssertTrue("\(error)".contains("example 1"), "\(error)")
        }
    }
}
