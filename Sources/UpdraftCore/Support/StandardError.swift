import Foundation

package enum FileHandleStandardError {
    package static func write(_ s: String) { FileHandle.standardError.write(s.data(using: .utf8)!) }
}
