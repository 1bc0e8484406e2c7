import Foundation

/// A value a test shares with code on other threads (handlers run on the training thread; fork/join
/// bodies), behind a lock: what a `@Sendable` closure may capture instead of a `var`.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    var value: Value { lock.lock(); defer { lock.unlock() }; return stored }
    @discardableResult
    func mutate<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock(); defer { lock.unlock() }
        return try body(&stored)
    }
}

extension Locked where Value: RangeReplaceableCollection {
    func append(_ element: Value.Element) { mutate { $0.append(element) } }
}
