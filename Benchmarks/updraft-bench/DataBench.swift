import Dispatch
import Foundation
import Synchronization
import Updraft
import UpdraftCommandLine

/// `updraft-bench data`: decode + preprocess throughput from image files, against torchvision's
/// ImageFolder + DataLoader with the same transforms and as many workers as cores.
let dataCommand = CLICommand(CommandSpec(
    name: "data",
    summary: "time decoding and preprocessing image files (JPEG and PNG), side by side with torchvision",
    options: OptionSpec.table("""
        --images N              images per format (default 1000)
        --format jpeg|png|both  which files to generate and read (default both)
        --width W               generated image width (default 500)
        --height H              generated image height (default 375)
        --dir DIR               where to write the images (kept; default: a temporary folder, removed after)
        --generate-only         write the images to --dir and stop (class folders 0...9 under DIR/jpeg and DIR/png)
        --reuse                 with --dir: read the images a previous run left there when their count matches, instead of writing them again
        --compare-pytorch       also run Benchmarks/pytorch_data.py on the same files and print the ratios
        --pytorch-script PATH   the torchvision script (default: found like pytorch_baseline.py)
        --json                  print JSON
        """),
    discussion: """
    The transforms are torchvision's evaluation recipe for a 227x227 model: the shorter side to 259
    (227 / 0.875), the middle 227x227 kept, antialiased bilinear (Pillow's filter), then a float
    [3, 227, 227] tensor per image, stacked into mini-batches of 64. Updraft lists the folder, reads
    every header, and prepares the batches through the trainer's prefetcher (worker threads, two
    batches ahead); torchvision uses ImageFolder + DataLoader(batch_size=64, num_workers=cores) with
    Resize(259), CenterCrop(227), ToTensor(). Each side's time runs from listing to the last batch.
    Per core: images/s divided by the cores used (the same on both sides).
    """
)) { args in try DataBench(args).run() }

struct DataBench {
    let images: Int
    let formats: [String]
    let width: Int
    let height: Int
    let dir: String?
    let generateOnly: Bool
    let reuse: Bool
    let comparePyTorch: Bool
    let pytorchScript: String?
    let json: Bool
    static let inputSize = 227, shorterSide = 259, batch = 64, classes = 10

    init(_ args: ParsedArguments) throws {
        images = try args.int("images") ?? 1000
        guard images >= 1 else { throw UsageError("--images must be at least 1, got \(images)") }
        switch args.value("format") ?? "both" {
        case "both": formats = ["jpeg", "png"]
        case "jpeg", "jpg": formats = ["jpeg"]
        case "png": formats = ["png"]
        case let f: throw UsageError("--format takes jpeg, png or both; got '\(f)'")
        }
        width = try args.int("width") ?? 500
        height = try args.int("height") ?? 375
        guard (16...8192).contains(width), (16...8192).contains(height) else {
            throw UsageError("--width and --height must be 16...8192")
        }
        dir = args.value("dir")
        generateOnly = args.flag("generate-only")
        if generateOnly && dir == nil { throw UsageError("--generate-only needs --dir DIR") }
        reuse = args.flag("reuse")
        if reuse && dir == nil { throw UsageError("--reuse needs --dir DIR (the folder a previous run wrote)") }
        comparePyTorch = args.flag("compare-pytorch")
        pytorchScript = args.value("pytorch-script")
        json = args.flag("json")
    }

    /// Photo-like content: smooth gradients, a few discs and fine texture, different per image, so
    /// JPEG and PNG sizes are realistic (about 40-60 KB JPEG at quality 90 for 500x375).
    static func generate(index: Int, width: Int, height: Int) -> DecodedImage {
        var pixels = [UInt8](repeating: 0, count: width * height * 3)
        var rng = SplitMix64(seed: UInt64(index) &* 0x9E37_79B9 &+ 17)
        let base = (0..<3).map { _ in Double(rng.next() % 200) }
        let slope = (0..<6).map { _ in Double(Int(rng.next() % 200) - 100) / 400 }
        let discs = (0..<4).map { _ in (x: Double(rng.next() % UInt64(width)), y: Double(rng.next() % UInt64(height)),
                                        r: Double(20 + rng.next() % 80), c: (0..<3).map { _ in Double(rng.next() % 256) }) }
        let waves = (0..<3).map { c in (0..<width).map { 20 * sin(Double($0 + 3 * c) / 17) } }
        let rowWave = (0..<height).map { cos(Double($0) / 23) }
        pixels.withUnsafeMutableBufferPointer { p in
            for y in 0..<height {
                for x in 0..<width {
                    let noise = Double(Int(rng.next() & 15) - 8)
                    for c in 0..<3 {
                        var v = base[c] + slope[2 * c] * Double(x) + slope[2 * c + 1] * Double(y) + waves[c][x] * rowWave[y]
                        for d in discs where (Double(x) - d.x) * (Double(x) - d.x) + (Double(y) - d.y) * (Double(y) - d.y) < d.r * d.r {
                            v = 0.3 * v + 0.7 * d.c[c]
                        }
                        p[(y * width + x) * 3 + c] = UInt8(max(0, min(255, v + noise)))
                    }
                }
            }
        }
        return DecodedImage(width: width, height: height, channels: 3, pixels: pixels)
    }

    /// Writes `count` images into class folders 0...9 of `root`, in parallel; returns the bytes written.
    static func write(count: Int, format: String, width: Int, height: Int, to root: URL) throws -> Int {
        for c in 0..<classes {
            try FileManager.default.createDirectory(at: root.appendingPathComponent(String(c)), withIntermediateDirectories: true)
        }
        let outcome = Mutex<(total: Int, failure: Error?)>((0, nil))
        DispatchQueue.concurrentPerform(iterations: count) { i in
            do {
                let image = generate(index: i, width: width, height: height)
                let bytes = format == "png" ? try ImageEncoder.png(image) : try ImageEncoder.jpeg(image, quality: 90)
                let url = root.appendingPathComponent("\(i % classes)/\(String(format: "%06d", i)).\(format == "png" ? "png" : "jpg")")
                try Data(bytes).write(to: url)
                outcome.withLock { $0.total += bytes.count }
            } catch {
                outcome.withLock { $0.failure = error }
            }
        }
        return try outcome.withLock { o in
            if let failure = o.failure { throw failure }
            return o.total
        }
    }

    /// The bytes of the `count` images `write` names, when exactly that many are in `root` and the first
    /// is `width` x `height`; else nil.
    static func existing(count: Int, format: String, width: Int, height: Int, in root: URL) -> Int? {
        let ext = format == "png" ? "png" : "jpg"
        let first = root.appendingPathComponent("0/000000.\(ext)").path
        guard let header = try? ImageHeader(contentsOfFile: first), header.width == width, header.height == height else { return nil }
        var total = 0
        for c in 0..<classes {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(String(c)).path)) ?? []
            let files = names.filter { $0.hasSuffix(".\(ext)") }
            guard files.count == count / classes + (c < count % classes ? 1 : 0) else { return nil }
            for name in files {
                let path = root.appendingPathComponent("\(c)/\(name)").path
                guard let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int else { return nil }
                total += size
            }
        }
        return total
    }

    struct Measurement: Codable {
        var format: String
        var images: Int
        var fileBytes: Int
        var listMilliseconds: Double
        var firstBatchMilliseconds: Double
        var totalMilliseconds: Double
        var imagesPerSecond: Double
        var cores: Int
        var imagesPerSecondPerCore: Double
        var pytorch: [String: Double]?
        var ratioPerCore: Double?
        enum CodingKeys: String, CodingKey {
            case format, images, fileBytes = "file_bytes", listMilliseconds = "list_ms", firstBatchMilliseconds = "first_batch_ms"
            case totalMilliseconds = "total_ms", imagesPerSecond = "images_per_second", cores
            case imagesPerSecondPerCore = "images_per_second_per_core", pytorch, ratioPerCore = "ratio_per_core"
        }
    }

    /// Reads every image of `root` as training would: listing and headers, then prefetched batches.
    static func measure(root: URL) throws -> (list: Double, first: Double, total: Double, count: Int) {
        let start = DispatchTime.now().uptimeNanoseconds
        func elapsed() -> Double { Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6 }
        let pre = ImagePreprocessing(width: inputSize, height: inputSize, colorSpace: .rgb, resize: .centerCrop(shorterSide: shorterSide))
        let dataset = try ImageFolderDataset(root: root, preprocessing: pre, imageCacheBytes: 0)
        let list = elapsed()
        let batches = stride(from: 0, to: dataset.count, by: batch).map { Array($0..<min($0 + batch, dataset.count)) }
        let prefetcher = BatchPrefetcher(batches: batches, depth: 2, load: { try dataset.example(at: $0) })
        defer { prefetcher.stop() }
        var first = 0.0
        for (b, indices) in batches.enumerated() {
            let prepared = prefetcher.take(b)
            let examples = try indices.map { try prepared.example($0) }
            let stacked = try ArrayBatchProvider(examples: examples).batch(at: examples.indices)
            precondition(stacked.inputs.shape == [indices.count, 3, inputSize, inputSize])
            if b == 0 { first = elapsed() }
        }
        return (list, first, elapsed(), dataset.count)
    }

    func run() throws -> Int32 {
        let root: URL
        var temporary: URL?
        if let dir {
            root = URL(fileURLWithPath: dir)
        } else {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-bench-data-\(getpid())")
            temporary = root
        }
        defer { if let temporary { try? FileManager.default.removeItem(at: temporary) } }
        var sizes: [String: Int] = [:]
        for format in formats {
            let folder = root.appendingPathComponent(format)
            if reuse, let bytes = Self.existing(count: images, format: format, width: width, height: height, in: folder) {
                printError("reusing \(images) \(format) images in \(folder.path)")
                sizes[format] = bytes
                continue
            }
            printError("writing \(images) \(width)x\(height) \(format) images to \(folder.path)")
            sizes[format] = try Self.write(count: images, format: format, width: width, height: height, to: folder)
        }
        if generateOnly { return 0 }
        let cores = HostInfo.usableCores
        var results: [Measurement] = []
        var notes: [String] = []
        for format in formats {
            let folder = root.appendingPathComponent(format)
            printError("reading \(folder.path) with Updraft")
            let m = try Self.measure(root: folder)
            let ips = Double(m.count) / (m.total / 1e3)
            var r = Measurement(format: format, images: m.count, fileBytes: sizes[format] ?? 0, listMilliseconds: m.list,
                                firstBatchMilliseconds: m.first, totalMilliseconds: m.total, imagesPerSecond: ips, cores: cores,
                                imagesPerSecondPerCore: ips / Double(cores))
            if comparePyTorch {
                if let script = PyTorchComparison.locateScript(explicit: pytorchScript, name: "pytorch_data.py") {
                    let args = [script, "--data", folder.path, "--workers", String(cores), "--batch", String(Self.batch),
                                "--size", String(Self.inputSize), "--shorter", String(Self.shorterSide)]
                    printError("running torchvision: python3 \(args.joined(separator: " "))")
                    let child = try runChild(executable: "/usr/bin/env", arguments: ["python3"] + args, captureStandardError: true)
                    if let object = try? JSONSerialization.jsonObject(with: Data(child.standardOutput.utf8)) as? [String: Any],
                       let pips = object["images_per_second"] as? Double {
                        var p: [String: Double] = ["images_per_second": pips]
                        for key in ["first_batch_ms", "total_ms", "workers"] { if let v = object[key] as? Double { p[key] = v } }
                        if let w = object["workers"] as? Int { p["workers"] = Double(w) }
                        r.pytorch = p
                        r.ratioPerCore = ips / pips
                    } else {
                        notes.append("torchvision run failed (status \(child.status)): \(child.standardError.suffix(400))\(child.standardOutput.suffix(400))")
                    }
                } else {
                    notes.append("torchvision comparison skipped: Benchmarks/pytorch_data.py not found (give --pytorch-script PATH)")
                }
            }
            results.append(r)
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            let report: [String: AnyEncodable] = ["runs": AnyEncodable(results), "notes": AnyEncodable(notes),
                                                  "transforms": AnyEncodable("Resize(\(Self.shorterSide)) + CenterCrop(\(Self.inputSize)) + float tensor, batch \(Self.batch)")]
            print(String(decoding: try encoder.encode(report), as: UTF8.self))
        } else {
            print("decode + preprocess: \(width)x\(height) files -> shorter side \(Self.shorterSide), center crop \(Self.inputSize), float batches of \(Self.batch); \(cores) cores")
            for r in results {
                print("  \(r.format) " + String(format: "%d images (%.1f MB): list %.0f ms, first batch %.0f ms, all %.0f ms: %.0f images/s, %.1f per core",
                             r.images, Double(r.fileBytes) / 1e6, r.listMilliseconds, r.firstBatchMilliseconds,
                             r.totalMilliseconds, r.imagesPerSecond, r.imagesPerSecondPerCore))
                if let p = r.pytorch, let ratio = r.ratioPerCore {
                    print(String(format: "    torchvision (%d workers): first batch %.0f ms, all %.0f ms: %.0f images/s; Updraft/torchvision per core %.2fx (target 1.5x)",
                                 Int(p["workers"] ?? 0), p["first_batch_ms"] ?? 0, p["total_ms"] ?? 0, p["images_per_second"] ?? 0, ratio))
                }
            }
            for note in notes { print("note: \(note)") }
        }
        return 0
    }
}

/// Type-erased Encodable for mixed JSON reports.
struct AnyEncodable: Encodable {
    let encodeValue: (Encoder) throws -> Void
    init<T: Encodable>(_ value: T) { encodeValue = value.encode }
    func encode(to encoder: Encoder) throws { try encodeValue(encoder) }
}
