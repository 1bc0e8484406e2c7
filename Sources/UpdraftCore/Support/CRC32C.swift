/// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as TFRecord files frame their records:
/// `crc32c("123456789") == 0xE3069283`. Table-driven, one byte at a time (records are small).
public enum CRC32C {
    private static let table: [UInt32] = (0..<256).map { n -> UInt32 in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? (c >> 1) ^ 0x82F6_3B78 : c >> 1 }
        return c
    }

    /// The CRC-32C of `bytes`.
    public static func checksum<C: Collection>(_ bytes: C) -> UInt32 where C.Element == UInt8 {
        var crc: UInt32 = 0xFFFF_FFFF
        for b in bytes { crc = table[Int((crc ^ UInt32(b)) & 0xFF)] ^ (crc >> 8) }
        return crc ^ 0xFFFF_FFFF
    }

    /// TFRecord's masked CRC: rotated right by 15 bits plus 0xa282ead8 (so a CRC stored inside
    /// checksummed data does not checksum to a fixed value).
    public static func masked(_ crc: UInt32) -> UInt32 {
        ((crc >> 15) | (crc << 17)) &+ 0xA282_EAD8
    }

    /// `masked(checksum(bytes))`.
    public static func maskedChecksum<C: Collection>(_ bytes: C) -> UInt32 where C.Element == UInt8 {
        masked(checksum(bytes))
    }
}
