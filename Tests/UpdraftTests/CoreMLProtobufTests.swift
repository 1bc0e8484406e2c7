import XCTest
@testable import UpdraftCore
@testable import UpdraftModel

/// The protobuf wire codec: scalars, lengths, packed and unpacked repeats, bounds checks, and
/// byte-for-byte preservation of what it does not touch.
final class CoreMLProtobufTests: XCTestCase {
    private func varintBytes(_ v: UInt64) -> [UInt8] {
        var out: [UInt8] = []
        appendVarint(v, to: &out)
        return out
    }

    func testVarintRoundTripsAndSizes() throws {
        let cases: [(UInt64, [UInt8])] = [
            (0, [0x00]), (1, [0x01]), (127, [0x7F]), (128, [0x80, 0x01]), (300, [0xAC, 0x02]),
            (UInt64.max, [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01]),
        ]
        for (value, bytes) in cases {
            XCTAssertEqual(varintBytes(value), bytes, "\(value)")
            XCTAssertEqual(varintSize(value), bytes.count)
            var i = 0
            XCTAssertEqual(try readVarint(bytes[...], &i, what: "test"), value)
            XCTAssertEqual(i, bytes.count)
        }
        // A negative int32/int64 takes 10 bytes and reads back.
        let field = ProtoField(number: 1, int64: -2)
        XCTAssertEqual(field.raw.count, 11)
        let m = try ProtoMessage(parsing: Array(field.raw))
        XCTAssertEqual(try ProtoReader(m, path: "T").int64(1, "x"), -2)
        XCTAssertEqual(try ProtoReader(m, path: "T").int32(1, "x"), -2)
    }

    func testMalformedVarintsThrowWithOffsets() {
        // 11 continuation bytes: longer than protobuf allows.
        assertErrorMentions(try ProtoMessage(parsing: [0x08] + [UInt8](repeating: 0x80, count: 10) + [0x01]),
                     containing: ["byte 1", "longer than 10 bytes"])
        // Tenth byte above 1: more than 64 bits.
        assertErrorMentions(try ProtoMessage(parsing: [0x08] + [UInt8](repeating: 0xFF, count: 9) + [0x02]),
                     containing: ["byte 1", "above 2^64 - 1"])
        // Ends in the middle of a varint.
        assertErrorMentions(try ProtoMessage(parsing: [0x08, 0x80, 0x80]), containing: ["byte 1", "ends after 2"])
        // Ends in the middle of a key.
        assertErrorMentions(try ProtoMessage(parsing: [0x08, 0x01, 0x80]), containing: ["byte 2", "field key"])
    }

    func testAbsurdLengthThrowsWithoutAllocating() {
        // Field 2 (Model.description) claims 2^60 bytes.
        let bytes: [UInt8] = [0x12] + varintBytes(1 << 60) + [0x01, 0x02]
        assertErrorMentions(try ProtoMessage(parsing: bytes), containing: ["byte 0", "field 2 claims 1152921504606846976 bytes", "only 2 remain"])
        assertErrorMentions(try CoreMLModel(serializedBytes: bytes), containing: ["claims 1152921504606846976 bytes"])
        // The largest varint as a length, too.
        assertErrorMentions(try ProtoMessage(parsing: [0x0A] + varintBytes(UInt64.max)), containing: ["claims"])
    }

    func testTruncatedFixedWidthValuesAndBadKeysThrow() {
        assertErrorMentions(try ProtoMessage(parsing: [0x0D, 0x00, 0x00]), containing: ["32-bit", "only 2 bytes remain"])
        assertErrorMentions(try ProtoMessage(parsing: [0x09, 1, 2, 3, 4, 5, 6, 7]), containing: ["64-bit", "only 7 bytes remain"])
        assertErrorMentions(try ProtoMessage(parsing: [0x0B]), containing: ["groups"])
        assertErrorMentions(try ProtoMessage(parsing: [0x0C]), containing: ["groups"])
        assertErrorMentions(try ProtoMessage(parsing: [0x0E]), containing: ["wire type 6"])
        assertErrorMentions(try ProtoMessage(parsing: [0x0F]), containing: ["wire type 7"])
        assertErrorMentions(try ProtoMessage(parsing: [0x00, 0x00]), containing: ["field number 0"])
        // A key whose field number exceeds 2^29 - 1.
        assertErrorMentions(try ProtoMessage(parsing: varintBytes(UInt64(1) << 40)), containing: ["field number"])
    }

    func testPackedAndUnpackedRepeatedScalarsReadAlike() throws {
        var packed = ProtoMessage()
        packed.fields.append(ProtoField(number: 1, packedFloats: [1.5, -2, 3.25]))
        packed.fields.append(ProtoField(number: 2, packedVarints: [3, 300, 70000]))
        var unpacked = ProtoMessage()
        for f: Float in [1.5, -2, 3.25] { unpacked.fields.append(ProtoField(number: 1, float: f)) }
        for v: UInt64 in [3, 300, 70000] { unpacked.fields.append(ProtoField(number: 2, varint: v)) }
        // Mixed: one packed run followed by an unpacked element.
        var mixed = ProtoMessage()
        mixed.fields.append(ProtoField(number: 1, packedFloats: [1.5, -2]))
        mixed.fields.append(ProtoField(number: 1, float: 3.25))
        mixed.fields.append(ProtoField(number: 2, varint: 3))
        mixed.fields.append(ProtoField(number: 2, packedVarints: [300, 70000]))
        for m in [packed, unpacked, mixed] {
            let r = ProtoReader(try ProtoMessage(parsing: m.serialized()), path: "T")
            XCTAssertEqual(try r.floats(1, "f"), [1.5, -2, 3.25])
            XCTAssertEqual(try r.varints(2, "v"), [3, 300, 70000])
            XCTAssertEqual(try r.sizes(2, "v"), [3, 300, 70000])
        }
        // Empty packed runs are allowed and add nothing.
        let empty = ProtoReader(try ProtoMessage(parsing: [0x0A, 0x00, 0x12, 0x00, 0x0A, 0x00]), path: "T")
        XCTAssertEqual(try empty.floats(1, "f"), [])
        XCTAssertEqual(try empty.varints(2, "v"), [])
        // Packed floats whose length is not a multiple of 4.
        let bad = ProtoReader(try ProtoMessage(parsing: [0x0A, 0x03, 1, 2, 3]), path: "T")
        assertErrorMentions(try bad.floats(1, "floatValue"), containing: ["floatValue", "not a multiple of 4", "byte 0"])
        // A packed varint run that ends inside a varint.
        let badVarints = ProtoReader(try ProtoMessage(parsing: [0x0A, 0x02, 0x01, 0x80]), path: "T")
        assertErrorMentions(try badVarints.varints(1, "shape"), containing: ["shape", "byte 3"])
    }

    func testScalarsStringsAndDoubles() throws {
        var m = ProtoMessage()
        m.fields.append(ProtoField(number: 1, string: "héllo"))
        m.fields.append(ProtoField(number: 2, double: 0.001))
        m.fields.append(ProtoField(number: 3, float: -1.25))
        m.fields.append(ProtoField(number: 4, bool: true))
        m.fields.append(ProtoField(number: 4, bool: false))   // the last occurrence wins
        let r = ProtoReader(try ProtoMessage(parsing: m.serialized()), path: "T")
        XCTAssertEqual(try r.string(1, "s"), "héllo")
        XCTAssertEqual(try r.double(2, "d"), 0.001)
        XCTAssertEqual(try r.float(3, "f"), -1.25)
        XCTAssertEqual(try r.bool(4, "b"), false)
        XCTAssertNil(try r.string(9, "absent"))
        let invalidUTF8 = ProtoReader(try ProtoMessage(parsing: [0x0A, 0x02, 0xC3, 0x28]), path: "T")
        assertErrorMentions(try invalidUTF8.string(1, "name"), containing: ["name", "UTF-8"])
    }

    func testWrongWireTypeNamesFieldPathAndOffset() throws {
        // Model.description (2) sent as a varint.
        assertErrorMentions(try CoreMLModel(serializedBytes: [0x08, 0x04, 0x10, 0x01]),
                     containing: ["field 'description' (2)", "length-delimited", "varint", "byte 2", "in Model"])
        // Model.specificationVersion (1) sent as a string.
        assertErrorMentions(try CoreMLModel(serializedBytes: [0x0A, 0x01, 0x41]),
                     containing: ["specificationVersion", "varint", "length-delimited"])
    }

    func testUnknownFieldsAndOddEncodingsSurviveEditing() throws {
        // Field 1 as a non-minimal varint (0x81 0x00 = 1), an unknown fixed64, an unknown string,
        // and a message field 5 holding field 1 and an unknown field 31.
        var bytes: [UInt8] = [0x08, 0x81, 0x00]
        bytes += [0x99, 0x06] + [1, 2, 3, 4, 5, 6, 7, 8]                  // field 99, wire type 1
        bytes += [0xBA, 0x3E, 0x03] + Array("abc".utf8)                    // field 999, wire type 2
        bytes += [0x2A, 0x05, 0x08, 0x07, 0xF8, 0x01, 0x00]                // field 5 {1: 7, 31: 0}
        var m = try ProtoMessage(parsing: bytes)
        XCTAssertEqual(m.serialized(), bytes)
        XCTAssertEqual(m.fields.map(\.number), [1, 99, 999, 5])
        // Edit only field 5's inner field 1: everything else keeps its bytes, field 5 is re-encoded.
        try m.editMessage(5) { inner in inner.set(ProtoField(number: 1, varint: 9)) }
        let out = m.serialized()
        XCTAssertEqual(Array(out.prefix(bytes.count - 7)), Array(bytes.prefix(bytes.count - 7)))
        XCTAssertEqual(Array(out.suffix(7)), [0x2A, 0x05, 0x08, 0x09, 0xF8, 0x01, 0x00])
        let r = ProtoReader(try ProtoMessage(parsing: out), path: "T")
        XCTAssertEqual(try r.message(5, "inner")?.uint64(1, "x"), 9)
        XCTAssertEqual(try r.message(5, "inner")?.uint64(31, "y"), 0)
        XCTAssertEqual(try r.uint64(1, "x"), 1)
    }

    func testSetReplacesInPlaceAndInsertsInFieldOrder() throws {
        var m = ProtoMessage()
        for n in [1, 3, 3, 7] { m.fields.append(ProtoField(number: n, varint: UInt64(n))) }
        m.set(ProtoField(number: 3, varint: 30))
        XCTAssertEqual(m.fields.map(\.number), [1, 3, 7])
        XCTAssertEqual(m.last(3)?.scalar, 30)
        m.set(ProtoField(number: 5, varint: 5))
        XCTAssertEqual(m.fields.map(\.number), [1, 3, 5, 7])
        m.set(ProtoField(number: 9, varint: 9))
        XCTAssertEqual(m.fields.map(\.number), [1, 3, 5, 7, 9])
        m.remove(3)
        XCTAssertEqual(m.fields.map(\.number), [1, 5, 7, 9])
        assertErrorMentions(try m.editMessage(42) { _ in }, containing: ["field 42", "holds 0"])
        assertErrorMentions(try m.editMessage(1, occurrence: 3) { _ in }, containing: ["occurrence 3 of field 1", "holds 1"])
        assertErrorMentions(try m.editMessage(1) { _ in }, containing: ["field 1", "message"])
    }

    func testHalfPrecisionConversion() {
        XCTAssertEqual(floatFromHalf(0x3C00), 1)
        XCTAssertEqual(floatFromHalf(0xC000), -2)
        XCTAssertEqual(floatFromHalf(0x7BFF), 65504)
        XCTAssertEqual(floatFromHalf(0x3555), 0.333251953125)
        XCTAssertEqual(floatFromHalf(0x0001), Float(1.0 / 16_777_216.0))      // smallest subnormal
        XCTAssertEqual(floatFromHalf(0x03FF), Float(1023.0 / 16_777_216.0))   // largest subnormal
        XCTAssertEqual(floatFromHalf(0x8000).sign, .minus)
        XCTAssertEqual(floatFromHalf(0x7C00), .infinity)
        XCTAssertEqual(floatFromHalf(0xFC00), -.infinity)
        XCTAssertTrue(floatFromHalf(0x7E00).isNaN)
    }
}
