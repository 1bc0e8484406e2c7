import Foundation

/// Keeps the frozen prefix's outputs (the tail's inputs) per example and augmentation variant, so
/// that epochs after the first run only the trainable tail. Host memory, up to a byte budget; past
/// the budget, examples are simply recomputed. Safe to use from several threads (data-parallel
/// replicas store what they computed).
final class FeatureCache {
    private let lock = NSLock()
    struct Key: Hashable { var index: Int; var variant: Int }
    private var entries: [Key: [String: [Float]]] = [:]
    private(set) var bytes = 0
    let budgetBytes: Int
    private(set) var hits = 0
    private(set) var misses = 0

    init(budgetBytes: Int) { self.budgetBytes = budgetBytes }

    func lookup(_ key: Key) -> [String: [Float]]? {
        lock.lock(); defer { lock.unlock() }
        if let e = entries[key] { hits += 1; return e }
        misses += 1
        return nil
    }

    /// Stores an example's features unless that would pass the budget.
    func store(_ key: Key, _ features: [String: [Float]]) {
        lock.lock(); defer { lock.unlock() }
        guard entries[key] == nil else { return }
        let size = features.values.reduce(0) { $0 + $1.count * 4 }
        guard bytes + size <= budgetBytes else { return }
        entries[key] = features
        bytes += size
    }

    var count: Int { lock.lock(); defer { lock.unlock() }; return entries.count }
}
