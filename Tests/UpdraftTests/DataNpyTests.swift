import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftData
@testable import UpdraftTraining

final class DataNpyTests: XCTestCase {
    private static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures/npy", isDirectory: true)

    /// A `.npy` file as numpy.save lays it out: magic, version, header length, the header dict padded
    /// with spaces and a newline so the data starts on a 64-byte boundary, then the data.
    private func npy(header: String, payload: [UInt8], version: UInt8 = 1) -> [UInt8] {
        let preamble = version == 1 ? 10 : 12
        var text = header
        while (preamble + text.utf8.count + 1) % 64 != 0 { text += " " }
        text += "\n"
        let length = text.utf8.count
        var bytes: [UInt8] = [0x93] + Array("NUMPY".utf8) + [version, 0]
        bytes += version == 1 ? [UInt8(length & 0xFF), UInt8(length >> 8)]
                              : [UInt8(length & 0xFF), UInt8((length >> 8) & 0xFF), UInt8((length >> 16) & 0xFF), UInt8(length >> 24)]
        return bytes + Array(text.utf8) + payload
    }

    private func npy(descr: String, shape: String, payload: [UInt8], fortran: Bool = false, version: UInt8 = 1) -> [UInt8] {
        npy(header: "{'descr': '\(descr)', 'fortran_order': \(fortran ? "True" : "False"), 'shape': \(shape), }",
            payload: payload, version: version)
    }

    private func littleEndian<T: FixedWidthInteger>(_ values: [T]) -> [UInt8] {
        values.flatMap { v in withUnsafeBytes(of: v.littleEndian) { Array($0) } }
    }

    private func parse(_ bytes: [UInt8]) throws -> NpyArray { try NpyArray(data: Data(bytes), name: "test.npy") }

    func testParsesHandWrittenFilesOfEachType() throws {
        let floats: [Float] = [1.5, -2, 0, 3.25, 1e-3, -7]
        let f4 = try parse(npy(descr: "<f4", shape: "(2, 3)", payload: littleEndian(floats.map(\.bitPattern))))
        XCTAssertEqual(f4.shape, [2, 3])
        XCTAssertEqual(f4.values, .float(floats))

        let doubles: [Double] = [0.1, -1e10, 2.5]
        let f8 = try parse(npy(descr: "<f8", shape: "(3,)", payload: littleEndian(doubles.map(\.bitPattern)), version: 2))
        XCTAssertEqual(f8.values, .float(doubles.map(Float.init)))

        XCTAssertEqual(try parse(npy(descr: "<i4", shape: "(3,)", payload: littleEndian([Int32(-5), 0, 70000]))).values,
                       .integer([-5, 0, 70000]))
        XCTAssertEqual(try parse(npy(descr: "|i1", shape: "(2,)", payload: [0xFF, 0x7F])).values, .integer([-1, 127]))
        XCTAssertEqual(try parse(npy(descr: "|u1", shape: "(2,)", payload: [0xFF, 3])).values, .integer([255, 3]))
        XCTAssertEqual(try parse(npy(descr: "<u2", shape: "(1,)", payload: [0x34, 0x12])).values, .integer([0x1234]))
        XCTAssertEqual(try parse(npy(descr: "<i8", shape: "(2,)", payload: littleEndian([Int64(-9), 1 << 40]))).values,
                       .integer([-9, 1 << 40]))
        XCTAssertEqual(try parse(npy(descr: "|b1", shape: "(3,)", payload: [1, 0, 1])).values, .integer([1, 0, 1]))
        // A 0-d array, and Python 2's long-integer spelling of a shape.
        XCTAssertEqual(try parse(npy(descr: "<f4", shape: "()", payload: littleEndian([Float(4).bitPattern]))).shape, [])
        XCTAssertEqual(try parse(npy(descr: "|u1", shape: "(2L, 1L)", payload: [1, 2])).shape, [2, 1])
        // Keys in another order, double quotes.
        let reordered = npy(header: "{\"shape\": (1,), \"fortran_order\": False, \"descr\": \"<f4\"}",
                            payload: littleEndian([Float(8).bitPattern]))
        XCTAssertEqual(try parse(reordered).values, .float([8]))
    }

    func testReadsNumpyWrittenFixtures() throws {
        let inputs = try NpyArray(contentsOf: Self.fixtures.appendingPathComponent("inputs_f4.npy"))
        XCTAssertEqual(inputs.shape, [3, 2, 4])
        XCTAssertEqual(inputs.values, .float((0..<24).map { Float($0) / 4 }))
        let v2 = try NpyArray(contentsOf: Self.fixtures.appendingPathComponent("inputs_f8_v2.npy"))
        XCTAssertEqual(v2.shape, [2, 3])
        XCTAssertEqual(v2.values, .float([1.5, -2.25, 3, 4, 5, 1e10]))
        XCTAssertEqual(try NpyArray(contentsOf: Self.fixtures.appendingPathComponent("targets_i8.npy")).values, .integer([2, 0, 1]))
    }

    /// From files, the inputs are memory-mapped and each row converted on demand: the same examples
    /// as parsing the whole array, for every input dtype the fixtures hold.
    func testMappedInputsMatchParsedInputs() throws {
        let folder = try DataTestFolder()
        var checked = 0
        for name in try FileManager.default.contentsOfDirectory(atPath: Self.fixtures.path).sorted() where name.hasPrefix("inputs_") {
            let url = Self.fixtures.appendingPathComponent(name)
            // Class targets 0, 1, ... for as many rows as the inputs have.
            let rows = try XCTUnwrap(NpyArray(contentsOf: url).shape.first)
            var header = Array("{'descr': '|u1', 'fortran_order': False, 'shape': (\(rows),), }".utf8)
            while (10 + header.count + 1) % 64 != 0 { header.append(0x20) }
            header.append(0x0A)
            let targets = try folder.write([0x93] + Array("NUMPY".utf8) + [1, 0, UInt8(header.count), 0] + header
                                           + (0..<rows).map { UInt8($0) }, to: "targets_\(rows).npy")
            let mapped = try NpyDataset(inputs: url, targets: targets)
            XCTAssertTrue(mapped.isMapped, name)
            let parsed = try NpyDataset(inputs: NpyArray(contentsOf: url), inputsName: name,
                                        targets: NpyArray(contentsOf: targets), targetsName: "targets")
            XCTAssertFalse(parsed.isMapped)
            XCTAssertEqual(mapped.count, parsed.count, name)
            for i in 0..<mapped.count { XCTAssertEqual(try mapped.example(at: i), try parsed.example(at: i), "\(name) row \(i)") }
            checked += 1
        }
        XCTAssertGreaterThanOrEqual(checked, 1)
    }

    func testDatasetFromNumpyFixtures() throws {
        let dataset = try NpyDataset(inputs: Self.fixtures.appendingPathComponent("inputs_f4.npy"),
                                     targets: Self.fixtures.appendingPathComponent("targets_i8.npy"), classCount: 3)
        XCTAssertEqual(dataset.count, 3)
        XCTAssertEqual(dataset.exampleShape, [2, 4])
        let second = try dataset.example(at: 1)
        XCTAssertEqual(second.input, Tensor(shape: [2, 4], data: (8..<16).map { Float($0) / 4 }))
        XCTAssertEqual(second.target, .classIndex(0))
        XCTAssertThrowsError(try dataset.example(at: 3))

        let reshaped = try NpyDataset(inputs: Self.fixtures.appendingPathComponent("inputs_f4.npy"),
                                      targets: Self.fixtures.appendingPathComponent("targets_u1_column.npy"),
                                      exampleShape: [2, 2, 2])
        XCTAssertEqual(try reshaped.example(at: 2).input.shape, [2, 2, 2])
        XCTAssertEqual(try reshaped.example(at: 2).target, .classIndex(0))

        let values = try NpyDataset(inputs: Self.fixtures.appendingPathComponent("inputs_f4.npy"),
                                    targets: Self.fixtures.appendingPathComponent("targets_f4_values.npy"))
        XCTAssertEqual(values.targetShape, [2])
        XCTAssertEqual(try values.example(at: 1).target, .values(Tensor(shape: [2], data: [2, 3.25])))
    }

    func testTargetKinds() throws {
        let inputs = try parse(npy(descr: "<f4", shape: "(2,)", payload: littleEndian([Float(1).bitPattern, Float(2).bitPattern])))
        let wholeFloats = try parse(npy(descr: "<f8", shape: "(2,)", payload: littleEndian([Double(3).bitPattern, Double(0).bitPattern])))
        let asClasses = try NpyDataset(inputs: inputs, inputsName: "x", targets: wholeFloats, targetsName: "y", targetKind: .classIndices)
        XCTAssertEqual(try asClasses.example(at: 0).target, .classIndex(3))
        XCTAssertEqual(try asClasses.example(at: 0).input, Tensor(shape: [1], data: [1]))
        let automatic = try NpyDataset(inputs: inputs, inputsName: "x", targets: wholeFloats, targetsName: "y")
        XCTAssertEqual(try automatic.example(at: 0).target, .values(Tensor(shape: [1], data: [3])))
        let ints = try parse(npy(descr: "<i8", shape: "(2,)", payload: littleEndian([Int64(4), 5])))
        let intValues = try NpyDataset(inputs: inputs, inputsName: "x", targets: ints, targetsName: "y", targetKind: .values)
        XCTAssertEqual(try intValues.example(at: 1).target, .values(Tensor(shape: [1], data: [5])))

        let fractional = try parse(npy(descr: "<f8", shape: "(2,)", payload: littleEndian([Double(0.5).bitPattern, Double(1).bitPattern])))
        XCTAssertThrowsError(try NpyDataset(inputs: inputs, inputsName: "x", targets: fractional, targetsName: "y.npy",
                                            targetKind: .classIndices)) { XCTAssertTrue("\($0)".contains("y.npy")) }
        XCTAssertThrowsError(try NpyDataset(inputs: inputs, inputsName: "x", targets: ints, targetsName: "y.npy", classCount: 5)) {
            XCTAssertTrue("\($0)".contains("target 1 is class 5"), "\($0)")
        }
        let negative = try parse(npy(descr: "<i8", shape: "(2,)", payload: littleEndian([Int64(0), -1])))
        XCTAssertThrowsError(try NpyDataset(inputs: inputs, inputsName: "x", targets: negative, targetsName: "y"))
    }

    func testShapeMismatchesAreErrors() throws {
        let inputs = try parse(npy(descr: "|u1", shape: "(2, 3)", payload: [1, 2, 3, 4, 5, 6]))
        let threeTargets = try parse(npy(descr: "|u1", shape: "(3,)", payload: [0, 1, 0]))
        XCTAssertThrowsError(try NpyDataset(inputs: inputs, inputsName: "x.npy", targets: threeTargets, targetsName: "y.npy")) { error in
            XCTAssertTrue("\(error)".contains("y.npy has 3 rows, x.npy has 2"), "\(error)")
        }
        let twoTargets = try parse(npy(descr: "|u1", shape: "(2, 2)", payload: [0, 1, 0, 1]))
        XCTAssertThrowsError(try NpyDataset(inputs: inputs, inputsName: "x", targets: twoTargets, targetsName: "y",
                                            targetKind: .classIndices))
        XCTAssertThrowsError(try NpyDataset(inputs: inputs, inputsName: "x", targets: twoTargets, targetsName: "y", exampleShape: [2, 2]))
        let empty = try parse(npy(descr: "<f4", shape: "(0, 3)", payload: []))
        XCTAssertThrowsError(try NpyDataset(inputs: empty, inputsName: "x", targets: empty, targetsName: "y"))
    }

    private func assertRejected(_ bytes: [UInt8], mentioning text: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try parse(bytes), file: file, line: line) { error in
            XCTAssertTrue("\(error)".contains("test.npy"), "names the file: \(error)", file: file, line: line)
            XCTAssertTrue("\(error)".contains(text), "\(error)", file: file, line: line)
        }
    }

    func testUnsupportedAndMalformedFilesAreClearErrors() throws {
        let four = littleEndian([Float(1).bitPattern])
        assertRejected(npy(descr: ">f4", shape: "(1,)", payload: four), mentioning: "big-endian")
        assertRejected(npy(descr: "<f4", shape: "(1,)", payload: four, fortran: true), mentioning: "Fortran")
        assertRejected(npy(descr: "<c8", shape: "(1,)", payload: four + four), mentioning: "'<c8' is not supported")
        assertRejected(npy(descr: "<f2", shape: "(2,)", payload: four), mentioning: "'<f2' is not supported")
        assertRejected(npy(header: "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", payload: four),
                       mentioning: "structured")
        assertRejected(npy(descr: "<f4", shape: "(2,)", payload: four), mentioning: "needs 8 bytes")
        assertRejected(npy(descr: "<f4", shape: "(1,)", payload: four + [0]), mentioning: "needs 4 bytes")
        assertRejected(npy(header: "{'descr': '<f4', 'fortran_order': False, 'shape': (1, }", payload: four), mentioning: "not a Python dictionary")
        assertRejected(npy(header: "{'descr': '<f4', 'shape': (1,)}", payload: four), mentioning: "fortran_order")
        assertRejected(npy(descr: "<f4", shape: "(-1,)", payload: four), mentioning: "shape")
        var v4 = npy(descr: "<f4", shape: "(1,)", payload: four)
        v4[6] = 4
        assertRejected(v4, mentioning: "version 4.0")
        let good = npy(descr: "<f4", shape: "(1,)", payload: four)
        assertRejected(Array(good.prefix(20)), mentioning: "truncated")
        assertRejected(Array("PK\u{3}\u{4} not numpy".utf8), mentioning: "not a .npy file")

        for name in ["big_endian.npy", "fortran_order.npy", "structured.npy"] {
            XCTAssertThrowsError(try NpyArray(contentsOf: Self.fixtures.appendingPathComponent(name))) { error in
                XCTAssertEqual((error as? UpdraftError)?.kind, .unsupported, "\(name): \(error)")
            }
        }
        XCTAssertThrowsError(try NpyArray(contentsOf: Self.fixtures.appendingPathComponent("missing.npy"))) { error in
            XCTAssertEqual((error as? UpdraftError)?.kind, .io)
        }
    }
}
