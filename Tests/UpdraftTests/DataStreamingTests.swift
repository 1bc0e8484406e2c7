import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftData
@testable import UpdraftTraining

/// Issue 14: image data streams (listing only at creation, decoding ahead of the trainer with
/// bounded memory), a labels file is a data layout, and the feature cache stays exact.
final class DataStreamingTests: XCTestCase {
    /// The prefetcher holds at most `depth` mini-batches of prepared examples, however long the epoch
    /// — counted, not timed — and hands out exactly what loading in order gives.
    func testPrefetcherHoldsAtMostDepthBatchesWhateverTheEpochLength() throws {
        for batchCount in [10, 400] {
            let batches = (0..<batchCount).map { b in (0..<8).map { (b * 8 + $0 * 3) % (batchCount * 4) } }
            let lock = NSLock()
            var loads = 0
            let prefetcher = BatchPrefetcher(batches: batches, depth: 2, load: { i in
                lock.lock(); loads += 1; lock.unlock()
                return TrainingExample(input: Tensor(shape: [1], data: [Float(i)]), target: .classIndex(i))
            })
            for (b, batch) in batches.enumerated() {
                let prepared = prefetcher.take(b)
                XCTAssertEqual(prepared.preparedCount, Set(batch).count)
                for i in batch { XCTAssertEqual(try prepared.example(i).input.data, [Float(i)]) }
            }
            prefetcher.stop()
            XCTAssertLessThanOrEqual(prefetcher.peakHeldExamples, 2 * 8, "\(batchCount) batches")
            XCTAssertGreaterThan(prefetcher.peakHeldExamples, 0)
            // A batch taken again (a retake after a device failure) is loaded on demand.
            XCTAssertEqual(prefetcher.take(0).preparedCount, 0)
            XCTAssertEqual(try prefetcher.take(0).example(5).input.data, [5])
        }
        // Examples the feature cache holds are not loaded; failures come back at use.
        struct Boom: Error {}
        let p = BatchPrefetcher(batches: [[0, 1, 2, 3]], needed: { $0 != 2 }, load: { i in
            if i == 3 { throw Boom() }
            return TrainingExample(input: Tensor(shape: [1], data: [1]), target: .classIndex(i))
        })
        let prepared = p.take(0)
        XCTAssertEqual(prepared.preparedCount, 3)
        XCTAssertThrowsError(try prepared.example(3))
        p.stop()
    }

    /// Writes `count` images of assorted sizes into `per`-class folders "0"..."3"; returns their folder.
    static func writeImages(_ folder: DataTestFolder, count: Int, jpeg: Bool = false) throws -> URL {
        for i in 0..<count {
            let w = 17 + (i * 5) % 13, h = 15 + (i * 3) % 11
            var pixels = [UInt8](repeating: 0, count: w * h * 3)
            for k in pixels.indices { pixels[k] = UInt8((k * (7 + i) + i * 31) % 256) }
            let image = DecodedImage(width: w, height: h, channels: 3, pixels: pixels)
            let bytes = jpeg ? try ImageEncoder.jpeg(image, quality: 90) : try ImageEncoder.png(image)
            try folder.write(bytes, to: "train/\(i % SqueezeShaped.classes)/\(i).\(jpeg ? "jpg" : "png")")
        }
        return folder.url.appendingPathComponent("train")
    }

    /// Nothing is decoded at creation; with the image cache off nothing is kept after reading every
    /// example, and with the default budget a small set is kept whole.
    func testImagesAreDecodedOnDemandAndKeptOnlyWithinTheCacheBudget() throws {
        let folder = try DataTestFolder()
        let root = try Self.writeImages(folder, count: 12)
        let pre = ImagePreprocessing(width: 15, height: 15, colorSpace: .rgb)
        let streaming = try ImageFolderDataset(root: root, preprocessing: pre, imageCacheBytes: 0)
        let cached = try ImageFolderDataset(root: root, preprocessing: pre)
        XCTAssertEqual(cached.cachedImageBytes, 0, "nothing is decoded when the data set is listed")
        for i in 0..<12 {
            XCTAssertEqual(try streaming.example(at: i), try cached.example(at: i))
            XCTAssertEqual(try cached.example(at: i), try cached.example(at: i), "a cached image is the decoded one")
        }
        XCTAssertEqual(streaming.cachedImageBytes, 0)
        XCTAssertEqual(cached.cachedImageBytes, 12 * 3 * 15 * 15)
    }

    /// Training from streamed files (prefetched on worker threads, feature cache on or off) gives the
    /// same run as training from the same examples held in memory; a random resized crop turns the
    /// feature cache off and says so.
    func testStreamingTrainsLikeInMemoryDataAndACropTurnsTheCacheOff() throws {
        let folder = try DataTestFolder()
        let root = try Self.writeImages(folder, count: 12)
        let model = try SqueezeShaped.model(batch: 4)
        let dataset = try ModelDataset(model: model, path: root).provider
        let inMemory = try ArrayBatchProvider(examples: (0..<dataset.count).map { try dataset.example(at: $0) })
        for cache in [true, false] {
            let streamed = try TrainingRun.train(model, dataset) { $0.featureCache.enabled = cache; $0.data.augmentation.horizontalFlip = true }
            let held = try TrainingRun.train(model, inMemory) { $0.featureCache.enabled = cache; $0.data.augmentation.horizontalFlip = true }
            assertSameTraining(streamed, held, tolerance: 0, "feature cache \(cache)")
            XCTAssertEqual(streamed.task.featureCacheStatistics == nil, !cache)
        }
        let cropped = try TrainingRun.train(model, dataset) { $0.data.augmentation.randomResizedCrop = 0.5...1 }
        XCTAssertEqual(cropped.state, .completed, "\(cropped.error.map { "\($0)" } ?? "")")
        XCTAssertNil(cropped.task.featureCacheStatistics)
        XCTAssertEqual(cropped.warnings.filter { $0.contains("feature cache off") && $0.contains("random resized crop") }.count, 1,
                       "\(cropped.warnings)")
        let notImages = try TrainingRun.train(model, inMemory) { $0.data.augmentation.randomResizedCrop = 0.5...1 }
        XCTAssertEqual(notImages.state, .failed)
        XCTAssertTrue("\(notImages.error.map { "\($0)" } ?? "")".contains("needs image training data"))
    }

    func testLabelsFileListsImagesRelativeToItself() throws {
        let folder = try DataTestFolder()
        let root = try Self.writeImages(folder, count: 8)
        try folder.write(Array("""
            path,label
            # a comment, then rows in any order
            train/3/7.png,3
            "train/0/0.png" , 0

            train/1/5.png,1\r
            """.utf8), to: "labels.csv")
        let model = try SqueezeShaped.model(batch: 4)
        let csv = try ModelDataset(model: model, path: folder.url.appendingPathComponent("labels.csv")).provider
        let byFolder = try ModelDataset(model: model, path: root).provider as! ImageFolderDataset
        XCTAssertEqual(csv.count, 3)
        for (k, file) in ["7", "0", "5"].enumerated() {
            let i = try XCTUnwrap(byFolder.files.firstIndex { $0.lastPathComponent == "\(file).png" })
            XCTAssertEqual(try csv.example(at: k), try byFolder.example(at: i))
        }
        let bad: [(String, String)] = [
            ("train/0/0.png,cat\n", "label 'cat' is none of the model's class labels"),
            ("train/0/0.png\n", "line 1: expected path,label"),
            ("\"train/0/0.png,0\n", "quoted field is not closed"),
            ("train/0/missing.png,0\n", "line 1: 'train/0/missing.png' cannot be read"),
            ("path,label\n", "has no path,label rows"),
        ]
        for (text, message) in bad {
            try folder.write(Array(text.utf8), to: "bad.csv")
            XCTAssertThrowsError(try ModelDataset(model: model, path: folder.url.appendingPathComponent("bad.csv"))) { error in
                XCTAssertTrue("\(error)".contains(message), "\(text): \(error)")
                XCTAssertTrue("\(error)".contains("bad.csv"), "the file is named: \(error)")
            }
        }
    }
}
