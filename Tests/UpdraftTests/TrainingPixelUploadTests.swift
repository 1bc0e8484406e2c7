import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftLayers
@testable import UpdraftData
@testable import UpdraftTraining

/// Image folders train through pixel upload (8-bit staging rows, `Backend.uploadPixels` with the
/// model's scaler on the device) with exactly the losses and weights of the float path it replaced
/// (`pixelUpload = false`): RGB, BGR and grayscale inputs with a scaler, flips and random resized
/// crops, the feature cache on and off, data-parallel replicas, validation, on the CPU and on PoCL.
final class TrainingPixelUploadTests: XCTestCase {
    /// Counts `uploadPixels` and float uploads of a whole batch of images.
    final class Counting: ForwardingBackend {
        let calls = Locked<[BackendCall.Kind: Int]>([:])
        override func intercept<T>(_ call: BackendCall, _ body: () throws -> T) throws -> T {
            calls.mutate { $0[call.kind, default: 0] += 1 }
            return try body()
        }
        override func upload(_ values: [Float], to buffer: DeviceBuffer) throws {
            // An image batch's floats: at least one 3x15x15 image.
            if values.count >= 675 { calls.mutate { $0[.upload, default: 0] += 1 } }
            try inner.upload(values, to: buffer)
        }
    }

    let scaler = ImageScaler(channelScale: 0.017125, redBias: -2.1179, greenBias: -2.0357, blueBias: -1.8044, grayBias: -1.5)

    /// Trains on `data` twice, float path then pixel path, on backends `make` gives (counted), and
    /// asserts the runs are identical and that each went the way it says.
    func assertPixelsTrainLikeFloats(_ model: CoreMLModel, _ data: BatchProvider, _ what: String,
                                     backends make: () throws -> [Backend],
                                     configure: (inout UpdateConfiguration) -> Void = { _ in },
                                     file: StaticString = #filePath, line: UInt = #line) throws {
        var runs: [TrainingRun] = []
        for pixels in [false, true] {
            let backends = try make().map(Counting.init)
            let run = try TrainingRun.train(model, data) { config in
                configure(&config)
                config.pixelUpload = pixels
                if backends.count == 1 { config.placement.backends = (backends[0], backends[0]) } else {
                    config.placement.dataParallel = DataParallelism(replicas: backends, shares: [1, 2])
                }
                config.data.validationData = data
            }
            let pixelCalls = backends.reduce(0) { $0 + ($1.calls.value[.uploadPixels] ?? 0) }
            let floatCalls = backends.reduce(0) { $0 + ($1.calls.value[.upload] ?? 0) }
            XCTAssertEqual(run.state, .completed, "\(what): \(run.error.map { "\($0)" } ?? "")", file: file, line: line)
            if pixels {
                XCTAssertGreaterThan(pixelCalls, 0, "\(what): the pixel path uploads bytes", file: file, line: line)
                XCTAssertEqual(floatCalls, 0, "\(what): and no float images", file: file, line: line)
            } else {
                XCTAssertEqual(pixelCalls, 0, "\(what): the float path uploads no bytes", file: file, line: line)
                XCTAssertGreaterThan(floatCalls, 0, file: file, line: line)
            }
            runs.append(run)
        }
        assertSameTraining(runs[0], runs[1], tolerance: 0, what, file: file, line: line)
        XCTAssertEqual(runs[0].epochs.map(\.validationLoss), runs[1].epochs.map(\.validationLoss), "\(what): validation",
                       file: file, line: line)
        XCTAssertEqual(runs[0].epochs.map(\.trainingAccuracy), runs[1].epochs.map(\.trainingAccuracy), file: file, line: line)
    }

    func images(_ folder: DataTestFolder, model: CoreMLModel, count: Int) throws -> BatchProvider {
        try ModelDataset(model: model, path: try DataStreamingTests.writeImages(folder, count: count)).provider
    }

    func testCPUPixelUploadTrainsLikeFloatsWithFlipsCropsCacheAndReplicas() throws {
        let folder = try DataTestFolder()
        let rgb = try SqueezeShaped.model(batch: 4, scaler: scaler)
        // 10 images in batches of 4: the last batch wraps round.
        let data = try images(folder, model: rgb, count: 10)
        XCTAssertTrue(data is PixelBatchProvider)
        for cache in [true, false] {
            try assertPixelsTrainLikeFloats(rgb, data, "rgb, flips, cache \(cache)", backends: { [CPUBackend()] }) {
                $0.featureCache.enabled = cache
                $0.data.augmentation = ImageAugmentation(horizontalFlip: true, verticalFlip: true, seed: 5)
            }
        }
        try assertPixelsTrainLikeFloats(rgb, data, "rgb, two replicas, cache", backends: { [CPUBackend(), CPUBackend()] }) {
            $0.data.augmentation = ImageAugmentation(horizontalFlip: true, seed: 2)
        }
        let gray = try SqueezeShaped.model(batch: 4, colorSpace: .grayscale, scaler: scaler)
        try assertPixelsTrainLikeFloats(gray, try images(folder, model: gray, count: 10), "grayscale, crop",
                                        backends: { [CPUBackend()] }) {
            $0.data.augmentation = ImageAugmentation(verticalFlip: true, randomResizedCrop: 0.3...1, seed: 1)
        }
        // Three images in batches of 4: every batch repeats an image (rows gathered, not a slice).
        let bgr = try SqueezeShaped.model(batch: 4, colorSpace: .bgr, scaler: scaler)
        try assertPixelsTrainLikeFloats(bgr, try images(folder, model: bgr, count: 3), "bgr, repeats, replicas, crop",
                                        backends: { [CPUBackend(), CPUBackend()] }) {
            $0.data.augmentation = ImageAugmentation(horizontalFlip: true, randomResizedCrop: 0.5...1, seed: 4)
        }
    }

    func testPoCLPixelUploadTrainsLikeFloats() throws {
        let context = try OpenCLTestSupport.context()
        let folder = try DataTestFolder()
        let rgb = try SqueezeShaped.model(batch: 4, scaler: scaler)
        let data = try images(folder, model: rgb, count: 10)
        try assertPixelsTrainLikeFloats(rgb, data, "PoCL rgb, flips, cache", backends: { [OpenCLBackend(context: context)] }) {
            $0.data.augmentation = ImageAugmentation(horizontalFlip: true, seed: 5)
        }
        let gray = try SqueezeShaped.model(batch: 4, colorSpace: .grayscale, scaler: scaler)
        try assertPixelsTrainLikeFloats(gray, try images(folder, model: gray, count: 7), "PoCL grayscale, crop",
                                        backends: { [OpenCLBackend(context: context)] }) {
            $0.data.augmentation = ImageAugmentation(randomResizedCrop: 0.4...1, seed: 3)
        }
    }

    /// `updraft evaluate`'s path: a `PixelBatch` predicts and evaluates exactly like the float batch.
    func testPixelBatchesPredictAndEvaluateLikeFloatBatches() throws {
        let folder = try DataTestFolder()
        let model = try SqueezeShaped.model(batch: 4, colorSpace: .bgr, scaler: scaler)
        let data = try images(folder, model: model, count: 5)
        let pixels = try XCTUnwrap(data as? PixelBatchProvider).pixelBatch(at: [4, 0, 3])
        XCTAssertEqual(pixels.shape, [3, 3, 15, 15])
        let floats = try data.batch(at: [4, 0, 3])
        XCTAssertEqual(pixels.targets, floats.targets)
        let training = TrainingGraph.inference(graph: try NetworkGraph(model: model))
        for backend in [CPUBackend() as Backend, OpenCLBackend(context: try OpenCLTestSupport.context())] {
            let executor = try Executor(training: training, optimizer: .sgd, backend: backend)
            XCTAssertEqual(try executor.predict(pixels).data, try executor.predict(floats.inputs).data, backend.name)
            XCTAssertEqual(try executor.evaluate(pixels).loss, try executor.evaluate(floats).loss, backend.name)
        }
        XCTAssertThrowsError(try XCTUnwrap(data as? PixelBatchProvider).pixelBatch(at: [0, 9])) {
            XCTAssertTrue("\($0)".contains("out of range"), "\($0)")
        }
    }

    /// A data set that scales on the host is not pixel data: the trainer takes its float examples.
    func testHostScaledImagesGoAsFloats() throws {
        let folder = try DataTestFolder()
        let model = try SqueezeShaped.model(batch: 4)
        let root = try DataStreamingTests.writeImages(folder, count: 4)
        let scaled = try ImageFolderDataset(root: root, preprocessing: ImagePreprocessing(
            width: 15, height: 15, colorSpace: .rgb, scaler: ImageScaler(channelScale: 1.0 / 255)))
        XCTAssertFalse(scaled.writesPixels)
        let counting = Counting(CPUBackend())
        let run = try TrainingRun.train(model, scaled) { $0.placement.backends = (counting, counting) }
        XCTAssertEqual(run.state, .completed)
        XCTAssertNil(counting.calls.value[.uploadPixels])
    }
}

/// The pixel prefetcher: each batch's examples land in rows of one staging buffer, in batch order,
/// from a pool that stops allocating once it holds depth + a few buffers, however long the epoch.
final class DataPixelStagingTests: XCTestCase {
    struct Stripes: PixelBatchProvider {
        var count: Int { 500 }
        var pixelShape: Shape { [1, 2, 3] }
        func example(at index: Int) throws -> TrainingExample {
            TrainingExample(input: Tensor(shape: pixelShape, data: (0..<6).map { Float(($0 + index) % 256) }), target: .classIndex(0))
        }
        func writePixels(at index: Int, into samples: UnsafeMutableBufferPointer<UInt8>) throws {
            try checkPixelBuffer(samples)
            if index == 13 { throw UpdraftError(.data, "image 13 is damaged") }
            for k in 0..<6 { samples[k] = UInt8((k + index) % 256) }
        }
    }

    func testStagingRowsAreReusedAndHoldEachBatchInOrder() throws {
        let data = Stripes()
        let pool = PixelStagingPool(rowBytes: 6, batchRows: 8, keep: 5)
        let batches = (0..<60).map { b in (0..<8).map { (b * 8 + $0 * 7) % 500 } }
        let loader = PixelLoader(provider: data, epoch: 0, augmentation: .none, pool: pool)
        let prefetcher = BatchPrefetcher(batches: batches, depth: 2, load: { try data.example(at: $0) }, pixels: loader)
        for (b, batch) in batches.enumerated() {
            let prepared = prefetcher.take(b)
            guard !batch.contains(13) else {
                XCTAssertThrowsError(try prepared.pixelRows(batch)) { XCTAssertTrue("\($0)".contains("damaged")) }
                continue
            }
            let rows = try prepared.pixelRows(batch)
            XCTAssertEqual(Array(rows.samples), batch.flatMap { i in (0..<6).map { UInt8(($0 + i) % 256) } })
            // A replica's slice is the same rows, not a copy.
            let slice = try prepared.pixelRows(Array(batch[3..<7]))
            XCTAssertTrue(slice.lease === rows.lease)
            XCTAssertEqual(slice.rows, 3..<7)
            // Out of order, repeated: gathered into another buffer.
            let odd = try prepared.pixelRows([batch[2], batch[0], batch[2]])
            XCTAssertFalse(odd.lease === rows.lease)
            XCTAssertEqual(Array(odd.samples.prefix(6)), Array(rows.samples[12..<18]))
        }
        prefetcher.stop()
        XCTAssertLessThanOrEqual(pool.allocations, 6, "staging buffers are reused, not made per batch")
    }

    func testFlipsOfSamplesAreTheTensorFlips() throws {
        let shape: Shape = [3, 5, 7]
        let samples = (0..<shape.count).map { UInt8($0 % 256) }
        let tensor = Tensor(shape: shape, data: samples.map(Float.init))
        let augmentation = ImageAugmentation(horizontalFlip: true, verticalFlip: true, seed: 8)
        var seen = Set<String>()
        for index in 0..<64 {
            var flipped = samples
            flipped.withUnsafeMutableBufferPointer { augmentation.flipPixels($0, shape: shape, epoch: 1, index: index) }
            XCTAssertEqual(flipped.map(Float.init), try augmentation.apply(to: tensor, epoch: 1, index: index).data)
            let f = augmentation.flips(epoch: 1, index: index)
            seen.insert("\(f.horizontal)\(f.vertical)")
        }
        XCTAssertEqual(seen.count, 4, "all four flip combinations were checked")
    }
}
