import Foundation
import Updraft

/// What `updraft-bench soak` trains besides `TasksBench`'s tasks, and the bad inputs it mixes in:
/// a small image network on seeded PNG folders (the in-process image tasks and the killed
/// `updraft train` runs), a bare k-NN, corrupt model bytes, unreadable images, hyperparameters
/// outside the allowed values and missing files.
enum SoakInputs {
    /// The image network's input side: 16x16 grayscale.
    static let imageSide = 16

    /// A 16x16 grayscale classifier of 10 digits-like classes: a frozen 3x3 convolution (so the
    /// feature cache is in play), then a strided convolution and a dense head that train; 3 epochs
    /// (2 allowed too), batch 4 (8 allowed too), shuffled. `adam` picks Adam, else SGD with momentum.
    static func imageNetwork(adam: Bool) throws -> CoreMLModel {
        let image = ImageFeatureType(width: imageSide, height: imageSide, colorSpace: .grayscale)
        var b = try ModelBuilder(input: FeatureDescription(name: "image", type: .image(image)), seed: adam ? 31 : 17)
        b.setImageScaler(ImageScaler(channelScale: 1 / 255))
        try b.convolution("conv1", outputChannels: 8, kernel: (3, 3))
        try b.activation("relu1", .relu)
        try b.convolution("conv2", outputChannels: 12, kernel: (3, 3), stride: (2, 2))
        try b.activation("relu2", .relu)
        try b.globalPoolClassifierHead(pool: "pool", dense: "fc", labels: .numbered(10))
        try b.makeUpdatable(["conv2", "fc"])
        try b.setCrossEntropyLoss(input: "probabilities")
        b.setOptimizer(adam ? .adam(learningRate: 0.01, miniBatchSize: 4, allowedMiniBatchSizes: [4, 8])
                            : .sgd(learningRate: 0.05, miniBatchSize: 4, allowedMiniBatchSizes: [4, 8], momentum: 0.9))
        b.setEpochs(3, allowed: [2, 3])
        b.setShuffle(true, seed: 3)
        return try b.build()
    }

    /// `perClass` PNGs in each of the class folders `0`...`9` under `root`: a class's images share
    /// a bright bar at a place of their own, over seeded noise.
    static func writeImages(to root: URL, perClass: Int, seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        for label in 0..<10 {
            let folder = root.appendingPathComponent("\(label)", isDirectory: true)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            for k in 0..<perClass {
                var pixels = (0..<imageSide * imageSide).map { _ in UInt8(truncatingIfNeeded: rng.next() % 96) }
                let row = (label * 3 + 1) % imageSide
                for x in 0..<imageSide { pixels[row * imageSide + x] = 200 &+ UInt8(truncatingIfNeeded: rng.next() % 56) }
                let png = try ImageEncoder.png(width: imageSide, height: imageSide, colorType: .gray, samples: pixels)
                try Data(png).write(to: folder.appendingPathComponent(String(format: "%03d.png", k)))
            }
        }
    }

    /// Copies of the image folder `images` in which one image cannot be decoded, under `root`:
    /// random bytes, a PNG cut short, an empty file (`variant` 0, 1, 2).
    static func unreadableImageFolders(from images: URL, to root: URL) throws -> [URL] {
        var folders: [URL] = []
        for variant in 0..<3 {
            let copy = root.appendingPathComponent("unreadable-\(variant)", isDirectory: true)
            try FileManager.default.copyItem(at: images, to: copy)
            let victim = copy.appendingPathComponent("\(3 + variant)/000.png")
            let bytes = try Data(contentsOf: victim)
            switch variant {
            case 0:
                var rng = SplitMix64(seed: 99)
                try Data((0..<bytes.count).map { _ in UInt8(truncatingIfNeeded: rng.next()) }).write(to: victim)
            case 1: try bytes.prefix(bytes.count / 2).write(to: victim)
            default: try Data().write(to: victim)
            }
            folders.append(copy)
        }
        return folders
    }

    /// A bare k-NN (no feature extractor) over vectors of `TasksBench`'s embedding width (16): the
    /// k-NN of the pipeline `NearestNeighborsPipeline` makes from `TasksBench.network`.
    static func bareKnn(neighbors: Int) throws -> CoreMLModel {
        let pipeline = try NearestNeighborsPipeline(neighbors: neighbors).make(featureExtractor: try TasksBench.network(learningRate: 0.01))
        guard case let .pipeline(p) = pipeline.spec.body, let knn = p.models.last else {
            throw UpdraftError(.invalidModel, "NearestNeighborsPipeline made no pipeline with a k-NN at its end")
        }
        return CoreMLModel(spec: knn)
    }

    /// Labelled vectors for `bareKnn`: 64 seeded 16-value examples of 10 classes.
    static func bareKnnData(seed: UInt64) throws -> KnnBench.LabelledImages {
        KnnBench.LabelledImages(images: try SyntheticImageDataset(count: TasksBench.examples, itemShape: [16], classes: 10, seed: seed))
    }

    /// `model`'s bytes made unreadable in one of four ways (`variant` 0...3): cut short at a point
    /// `rng` picks, random bytes of the same length, the first bytes overwritten with 0xFF, nothing.
    static func corrupt(_ model: CoreMLModel, variant: Int, rng: inout SplitMix64) -> Data {
        let bytes = model.serializedBytes()
        switch variant % 4 {
        case 0: return Data(bytes.prefix(1 + Int(rng.next() % UInt64(bytes.count - 1))))
        case 1: return Data((0..<bytes.count).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
        case 2: return Data([UInt8](repeating: 0xFF, count: 16) + bytes.dropFirst(16))
        default: return Data()
        }
    }
}
