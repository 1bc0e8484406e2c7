import Foundation

enum FileHandleStandardError {
    static func write(_ s: String) { FileHandle.standardError.write(s.data(using: .utf8)!) }
}
