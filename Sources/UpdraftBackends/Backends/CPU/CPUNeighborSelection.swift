/// The k best matches seen so far (`NeighborMatch.precedes` order), as a max-heap on the worst.
struct BoundedMatches {
    let k: Int
    private var heap: [NeighborMatch] = []

    init(k: Int) { self.k = k; heap.reserveCapacity(k + 1) }

    /// The worst of the k kept, once k are kept; nil before.
    var worst: NeighborMatch? { heap.count == k ? heap.first : nil }

    mutating func offer(_ m: NeighborMatch) {
        if heap.count < k {
            heap.append(m)
            var i = heap.count - 1
            while i > 0 {
                let parent = (i - 1) / 2
                guard heap[parent].precedes(heap[i]) else { break }
                heap.swapAt(parent, i)
                i = parent
            }
        } else if let top = heap.first, m.precedes(top) {
            heap[0] = m
            var i = 0
            while true {
                let l = 2 * i + 1, r = l + 1
                var largest = i
                if l < heap.count && heap[largest].precedes(heap[l]) { largest = l }
                if r < heap.count && heap[largest].precedes(heap[r]) { largest = r }
                if largest == i { break }
                heap.swapAt(i, largest)
                i = largest
            }
        }
    }

    /// The kept matches, nearest first.
    func sorted() -> [NeighborMatch] { heap.sorted { $0.precedes($1) } }
}

/// One query's k best while a scan still runs on float distances, measuring exactly (in Double,
/// `NeighborSearch.exactDistance`) only what can still matter: a sample that passes the float
/// filter is kept unmeasured (`pending`) with bounds of its exact distance, and measured when the
/// list fills or the scan ends (`resolve`), by then mostly ruled out by samples seen after it.
///
/// Why: measuring every sample that passes at the moment it passes costs k·ln(N/k) exact distances
/// per query (each a D-long chain of dependent Double additions); for D = 1000 that was 40% of a
/// batch search. Deferred, about k are measured.
///
/// The limit: the k smallest upper bounds seen belong to k samples whose exact distances are at
/// most the largest of them, so a sample whose lower bound is above it is strictly worse than k
/// others, and out; so is one whose lower bound is above the k-th exact distance measured.
struct PendingMatches {
    let k: Int
    /// The measured samples' k best.
    private(set) var exact: BoundedMatches
    /// The k smallest upper bounds seen (as distances of their samples).
    private var uppers: BoundedMatches
    /// Samples not yet measured, with a lower bound of their exact distance.
    private var pending: [(sample: Int, lower: Double)] = []
    /// A sample whose exact distance is above this (lower bound above it) is not among the k best.
    private(set) var limit = Double.infinity
    /// Pending samples that trigger a prune (and, if half stay, a measurement).
    let capacity: Int

    init(k: Int) {
        self.k = k
        exact = BoundedMatches(k: k)
        uppers = BoundedMatches(k: k)
        capacity = 4 * k + 64
    }

    /// A sample whose exact distance lies in lower...upper (and lower ≤ `limit`). True when the
    /// pending list stays full after a prune: the caller then measures it (`resolve`).
    @inline(__always) mutating func offer(_ sample: Int, lower: Double, upper: Double) -> Bool {
        pending.append((sample, lower))
        if uppers.worst.map({ upper < $0.squaredDistance }) ?? true {
            uppers.offer(NeighborMatch(sample: sample, squaredDistance: upper))
            updateLimit()
        }
        guard pending.count >= capacity else { return false }
        prune()
        return pending.count > capacity / 2
    }

    /// A sample measured already.
    mutating func offer(_ match: NeighborMatch) {
        exact.offer(match)
        updateLimit()
    }

    /// Measures every pending sample that can still be among the k best (`samples`: rows of `dimension`).
    mutating func resolve(query: UnsafePointer<Float>, samples x: UnsafePointer<Float>, dimension d: Int) {
        prune()
        var i = 0
        while i + 4 <= pending.count {
            let s = (pending[i].sample, pending[i + 1].sample, pending[i + 2].sample, pending[i + 3].sample)
            let e = NeighborSearch.exactDistances(query, x + s.0 * d, x + s.1 * d, x + s.2 * d, x + s.3 * d, dimension: d)
            exact.offer(NeighborMatch(sample: s.0, squaredDistance: e.0))
            exact.offer(NeighborMatch(sample: s.1, squaredDistance: e.1))
            exact.offer(NeighborMatch(sample: s.2, squaredDistance: e.2))
            exact.offer(NeighborMatch(sample: s.3, squaredDistance: e.3))
            i += 4
        }
        for p in pending[i...] { exact.offer(NeighborMatch(sample: p.sample, squaredDistance: NeighborSearch.exactDistance(query, x + p.sample * d, dimension: d))) }
        pending.removeAll(keepingCapacity: true)
        updateLimit()
    }

    /// Takes in the state of another scan of the same query over other samples.
    mutating func absorb(_ other: PendingMatches) {
        for u in other.uppers.sorted() { uppers.offer(u) }
        for m in other.exact.sorted() { exact.offer(m) }
        pending += other.pending
        updateLimit()
    }

    /// The k best, nearest first (after `resolve`).
    func sorted() -> [NeighborMatch] {
        precondition(pending.isEmpty, "resolve before reading the matches")
        return exact.sorted()
    }

    private mutating func prune() {
        let l = limit
        pending.removeAll { $0.lower > l }
    }

    private mutating func updateLimit() {
        limit = Swift.min(uppers.worst?.squaredDistance ?? .infinity, exact.worst?.squaredDistance ?? .infinity)
    }
}
