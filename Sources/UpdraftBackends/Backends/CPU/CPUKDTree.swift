import Foundation
import UpdraftCore

/// A k-d tree over a k-NN's samples (Core ML's single kd-tree index), built when the samples are
/// known, searched exactly: the same neighbours, in the same order and with the same distances, as
/// `NeighborSearch` (and the plain loop it is checked against).
///
/// Each inner node splits its samples at the median of the dimension in which they spread most;
/// a node of at most `leafSize` samples is a leaf. A search visits the side of a split the query
/// lies on first, and the other side only while the distance to the split plane could still beat
/// (or tie) the k-th best found, so ties go to the lower sample index as in the linear scan.
public final class KDTree: @unchecked Sendable {
    public let dimension: Int
    public let count: Int
    public let leafSize: Int
    let samples: [Float]
    /// Sample indices, ordered so that every node's samples are one contiguous range.
    private var order: [Int]
    private var nodes: [Node] = []

    private struct Node {
        /// The node's samples: `order[start..<end]`.
        var start: Int, end: Int
        /// For an inner node: the split dimension and value, and its children; -1 for a leaf.
        var dimension = -1
        var split: Float = 0
        var left = -1, right = -1
    }

    /// A tree over `samples` (whole rows of `dimension`) with leaves of at most `leafSize` samples.
    public init(samples: [Float], dimension: Int, leafSize: Int) {
        precondition(dimension > 0 && samples.count % dimension == 0 && leafSize >= 1)
        self.samples = samples
        self.dimension = dimension
        self.leafSize = leafSize
        count = samples.count / dimension
        order = Array(0..<count)
        if count > 0 { _ = build(0, count) }
    }

    /// The number of leaves (a tree of `count` ≤ `leafSize` samples is one leaf).
    public var leafCount: Int { nodes.filter { $0.dimension < 0 }.count }

    private func build(_ start: Int, _ end: Int) -> Int {
        let id = nodes.count
        nodes.append(Node(start: start, end: end))
        guard end - start > leafSize else { return id }
        // The dimension of largest spread.
        var bestDim = 0
        var bestSpread: Float = -1
        for j in 0..<dimension {
            var lo = Float.infinity, hi = -Float.infinity
            for i in start..<end { let v = samples[order[i] * dimension + j]; lo = min(lo, v); hi = max(hi, v) }
            if hi - lo > bestSpread { bestSpread = hi - lo; bestDim = j }
        }
        guard bestSpread > 0 else { return id }  // every sample the same: a leaf, however many
        let d = dimension, samples = self.samples
        order[start..<end].sort { (samples[$0 * d + bestDim], $0) < (samples[$1 * d + bestDim], $1) }
        let mid = (start + end) / 2
        nodes[id].dimension = bestDim
        nodes[id].split = samples[order[mid] * d + bestDim]
        let left = build(start, mid)
        let right = build(mid, end)
        nodes[id].left = left
        nodes[id].right = right
        return id
    }

    /// The k nearest samples of `query` (`dimension` values), nearest first; all samples when k ≥ count.
    public func search(_ query: [Float], k: Int) -> [NeighborMatch] {
        precondition(query.count == dimension)
        let k = min(k, count)
        guard k > 0 else { return [] }
        var best = BoundedMatches(k: k)
        query.withUnsafeBufferPointer { q in
            samples.withUnsafeBufferPointer { x in visit(0, q.baseAddress!, x.baseAddress!, &best) }
        }
        return best.sorted()
    }

    private func visit(_ id: Int, _ q: UnsafePointer<Float>, _ x: UnsafePointer<Float>, _ best: inout BoundedMatches) {
        let node = nodes[id]
        guard node.dimension >= 0 else {
            for i in node.start..<node.end {
                let s = order[i]
                best.offer(NeighborMatch(sample: s, squaredDistance: NeighborSearch.exactDistance(q, x + s * dimension, dimension: dimension)))
            }
            return
        }
        let gap = Double(q[node.dimension]) - Double(node.split)
        let (near, far) = gap < 0 ? (node.left, node.right) : (node.right, node.left)
        visit(near, q, x, &best)
        // Every sample beyond the plane is at least gap² away (less a rounding margin): visit it
        // only while that could beat or tie the k-th best.
        if let worst = best.worst, gap * gap * (1 - 1e-12) > worst.squaredDistance { return }
        visit(far, q, x, &best)
    }
}
