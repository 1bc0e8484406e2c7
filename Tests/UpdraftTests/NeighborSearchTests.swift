import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

/// The fast exact searches (`NeighborSearch`: SIMD loop and SGEMM; `KDTree`) against the plain loop:
/// every sample's distance in Double, the k smallest, ties to the lower index.
final class NeighborSearchTests: XCTestCase {
    /// The plain loop, written here: the definition the searches must reproduce exactly.
    private func plain(_ samples: [Float], _ query: ArraySlice<Float>, d: Int, k: Int) -> [NeighborMatch] {
        let q = Array(query)
        let all = (0..<samples.count / d).map { s -> NeighborMatch in
            var dist = 0.0
            for j in 0..<d { let t = Double(q[j]) - Double(samples[s * d + j]); dist += t * t }
            return NeighborMatch(sample: s, squaredDistance: dist)
        }
        return Array(all.sorted { $0.squaredDistance < $1.squaredDistance || ($0.squaredDistance == $1.squaredDistance && $0.sample < $1.sample) }.prefix(k))
    }

    private func random(_ n: Int, _ d: Int, seed: UInt64, integers: Bool = false, offset: Float = 0) -> [Float] {
        var rng = SplitMix64(seed: seed)
        return (0..<n * d).map { _ in integers ? Float(Int(rng.nextDouble() * 4)) : rng.nextFloat(in: -1...1) + offset }
    }

    private func check(n: Int, d: Int, queries: Int, k: Int, seed: UInt64, integers: Bool = false, offset: Float = 0,
                       file: StaticString = #filePath, line: UInt = #line) {
        let samples = random(n, d, seed: seed, integers: integers, offset: offset)
        let q = random(queries, d, seed: seed + 1, integers: integers, offset: offset)
        let expected = (0..<queries).map { plain(samples, q[$0 * d..<($0 + 1) * d], d: d, k: k) }
        let search = NeighborSearch(samples: samples, dimension: d, threads: 2)
        XCTAssertEqual(search.search(q, k: k), expected, "linear, n \(n) d \(d) queries \(queries) k \(k)", file: file, line: line)
        for leaf in [1, 3, 40] {
            let tree = KDTree(samples: samples, dimension: d, leafSize: leaf)
            let found = (0..<queries).map { tree.search(Array(q[$0 * d..<($0 + 1) * d]), k: k) }
            XCTAssertEqual(found, expected, "kd-tree leaf \(leaf), n \(n) d \(d) k \(k)", file: file, line: line)
        }
    }

    func testAFewQueriesMatchThePlainLoop() {
        check(n: 500, d: 7, queries: 3, k: 5, seed: 1)
        check(n: 9000, d: 33, queries: 2, k: 1, seed: 2)
        check(n: 300, d: 128, queries: 1, k: 20, seed: 3)
    }

    func testABatchMatchesThePlainLoop() {
        check(n: 2500, d: 16, queries: 40, k: 3, seed: 4)
        check(n: 700, d: 100, queries: 9, k: 10, seed: 5)
        // Long samples: the threads split the sample blocks, their k best merged.
        check(n: 5000, d: 600, queries: 12, k: 7, seed: 13)
        // Far from the origin, where ‖q‖² + ‖x‖² − 2q·x cancels most: the exact re-check decides.
        check(n: 1500, d: 24, queries: 20, k: 4, seed: 6, offset: 300)
    }

    /// Small integer coordinates make many exact ties: the lower sample index goes first everywhere.
    func testTiesGoToTheLowerIndex() {
        check(n: 400, d: 3, queries: 12, k: 7, seed: 7, integers: true)
        check(n: 400, d: 3, queries: 2, k: 7, seed: 8, integers: true)
        // Duplicated samples: identical distances, indices in order.
        let row: [Float] = [1, 2, 3]
        let samples = Array([[Float]](repeating: row, count: 10).joined())
        let search = NeighborSearch(samples: samples, dimension: 3)
        XCTAssertEqual(search.search([1, 2, 4], k: 4)[0].map(\.sample), [0, 1, 2, 3])
        XCTAssertEqual(KDTree(samples: samples, dimension: 3, leafSize: 2).search([1, 2, 4], k: 4).map(\.sample), [0, 1, 2, 3])
    }

    /// A batch's distance products on an OpenCL device (PoCL in CI), more blocks than one: the same answers.
    func testABatchOnAnOpenCLDeviceMatchesThePlainLoop() throws {
        let backend = OpenCLBackend(context: try OpenCLTestSupport.context())
        for (n, d, offset) in [(NeighborSearch.deviceBlock + 300, 12, Float(0)), (900, 40, 200)] {
            let samples = random(n, d, seed: UInt64(n), offset: offset), q = random(10, d, seed: 77, offset: offset)
            let search = NeighborSearch(samples: samples, dimension: d, threads: 2)
            try search.attach(backend)
            XCTAssertEqual(search.deviceName, backend.name)
            let expected = (0..<10).map { plain(samples, q[$0 * d..<($0 + 1) * d], d: d, k: 6) }
            XCTAssertEqual(search.search(q, k: 6), expected, "n \(n) d \(d)")
            XCTAssertNil(search.deviceFailure)
            // After the first block every query has its k: the device picks the second block's candidates.
            XCTAssertEqual(search.deviceFilteredBlocks, n > NeighborSearch.deviceBlock ? 1 : 0)
        }
    }

    func testKLargerThanTheSamplesTakesThemAllAndEmptyFindsNone() {
        check(n: 5, d: 4, queries: 10, k: 9, seed: 9)
        XCTAssertEqual(NeighborSearch(samples: [], dimension: 4).search([0, 0, 0, 0], k: 3), [[]])
        XCTAssertEqual(KDTree(samples: [], dimension: 4, leafSize: 2).search([0, 0, 0, 0], k: 3), [])
    }

    func testTheTreeHasTheLeavesItsLeafSizeAsksFor() {
        let samples = random(1000, 5, seed: 10)
        XCTAssertEqual(KDTree(samples: samples, dimension: 5, leafSize: 1000).leafCount, 1)
        let tree = KDTree(samples: samples, dimension: 5, leafSize: 10)
        XCTAssertGreaterThanOrEqual(tree.leafCount, 100)
        XCTAssertLessThanOrEqual(tree.leafCount, 128)
    }

    // MARK: Deferred measurement (`PendingMatches`)

    /// The four-at-once sums are the single sums, bit for bit.
    func testFourDistancesAtOnceAreTheSingleSums() {
        for d in [1, 3, 17, 1000] {
            let x = random(5, d, seed: UInt64(d)), q = random(1, d, seed: 99, offset: 0.5)
            x.withUnsafeBufferPointer { xs in
                q.withUnsafeBufferPointer { qs in
                    let p = xs.baseAddress!, one = qs.baseAddress!
                    let four = NeighborSearch.exactDistances(one, p + 4 * d, p, p + 2 * d, p + d, dimension: d)
                    let single = [4, 0, 2, 1].map { NeighborSearch.exactDistance(one, p + $0 * d, dimension: d).bitPattern }
                    XCTAssertEqual([four.0, four.1, four.2, four.3].map(\.bitPattern), single, "d \(d)")
                }
            }
        }
    }

    /// Samples stored farthest first: every one passes the float filter when it arrives, so the
    /// pending lists fill and are pruned and measured mid-scan; short and long samples, a batch
    /// (several sample blocks, split by query and by block) and single queries.
    func testSamplesStoredFarthestFirstMatchThePlainLoop() {
        for (n, d, k) in [(9000, 8, 3), (3 * 1024 + 5, 520, 9)] {
            var rng = SplitMix64(seed: UInt64(d))
            var samples: [Float] = []
            for i in 0..<n {
                let radius = Float(n - i) * 0.01
                samples += (0..<d).map { j in (j == i % d ? radius : 0) + rng.nextFloat(in: -0.001...0.001) }
            }
            let queries = random(9, d, seed: 5).map { $0 * 0.0001 }
            let search = NeighborSearch(samples: samples, dimension: d, threads: 2)
            let expected = (0..<9).map { plain(samples, queries[$0 * d..<($0 + 1) * d], d: d, k: k) }
            XCTAssertEqual(search.search(queries, k: k), expected, "batch, n \(n) d \(d)")
            XCTAssertEqual((0..<2).map { search.search(Array(queries[$0 * d..<($0 + 1) * d]), k: k)[0] }, Array(expected.prefix(2)), "single, n \(n) d \(d)")
        }
    }

    /// More exact ties than a pending list holds (600 copies of one row among others): the lower
    /// indices first, in a batch and alone.
    func testMoreTiesThanAPendingListHoldsGoToTheLowerIndex() {
        let d = 5
        var samples = random(300, d, seed: 11, offset: 3)
        let copy: [Float] = [0.5, 0.25, -0.5, 0, 1]
        for _ in 0..<600 { samples += copy }
        samples += random(300, d, seed: 12, offset: 3)
        let queries = (0..<8).flatMap { i in copy.map { $0 + Float(i) * 0.01 } }
        let search = NeighborSearch(samples: samples, dimension: d, threads: 2)
        let expected = (0..<8).map { plain(samples, queries[$0 * d..<($0 + 1) * d], d: d, k: 12) }
        XCTAssertEqual(expected[0].map(\.sample), Array(300..<312))
        XCTAssertEqual(search.search(queries, k: 12), expected)
        XCTAssertEqual(search.search(Array(queries.prefix(d)), k: 12), [expected[0]])
    }
}
