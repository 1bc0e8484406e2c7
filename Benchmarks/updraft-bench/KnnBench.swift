import Dispatch
import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft-bench knn`: exact k-NN search throughput (queries/s) over N stored samples of D floats,
/// for single queries and batches, side by side with faiss-cpu `IndexFlatL2` and scikit-learn's
/// brute force on the same data and thread count; correctness first (the plain Double loop).
let knnCommand = CLICommand(CommandSpec(
    name: "knn",
    summary: "time exact k-NN search (linear index) side by side with faiss and scikit-learn",
    options: OptionSpec.table("""
        --sizes NxD,...    stored samples x dimension (default 10000x128,100000x128,1000000x128,10000x1000,100000x1000)
        --k K              neighbours per query (default 10)
        --batches B,...    query batch sizes (default 1,256)
        --threads T        threads for every side (default: every core)
        --repeat R         runs per figure, the best kept (default 3)
        --compare          also run Benchmarks/knn_baseline.py (faiss-cpu, scikit-learn) on the same data
        --script PATH      the baseline script (default: found like pytorch_baseline.py)
        --device N         run batches' distance products on OpenCL device N (`updraft devices`); default the CPU
        --append N         also time a k-NN update through SqueezeNet 1.1 at 227x227, batch 64: N synthetic images appended
        --compute-units U  with --append: cpuOnly, cpuAndGPU or all (default cpuOnly)
        --json             print JSON
        """),
    discussion: """
    Data: uniform random floats in [-1, 1] from a fixed seed; 256 queries of the same law. Updraft's
    search is `NeighborSearch` (the k-NN predictor's): float distances (SGEMM for a batch, a SIMD loop
    for fewer than 8 queries) filtered by their rounding bounds, then exact Double distances. Before
    timing, its neighbours for 4 queries are checked against the plain Double loop. A single query
    is timed over 16 different queries (queries/s = 16 / best time). Memory: the bytes the index
    holds per stored sample (4·D for the sample, 8 for its kept squared norm). Targets: at least
    1.0x faiss at every batch size and 2x scikit-learn.

    --append N: `updraft create knn` on a SqueezeNet 1.1 (227x227, fresh weights; the embedding is
    the 1000-wide flatten) and an update task appending N synthetic images in batches of 64 on the
    compute units given; images/s beside Benchmarks/knn_extract_pytorch.py (torchvision's SqueezeNet
    1.1 computing the same embedding, forward only, same threads) when PyTorch is installed. Target 3x.
    """
)) { args in try KnnBench(args).run() }

struct KnnBench {
    struct Size { var n: Int; var d: Int }
    /// One figure: Updraft's queries/s for N samples of D at a batch size, and the baselines' (JSON keys as named here).
    struct Row: Codable {
        var samples: Int, dimension: Int, batch: Int
        var queriesPerSecond: Double
        var faiss: Double?, sklearn: Double?
        var bytesPerSample: Int
        /// Updraft's neighbours equal the plain loop's; the baselines found the same (as sets).
        var checked: Bool, baselinesAgree: Bool?
    }

    // The options, as parsed.
    let sizes: [Size], batches: [Int], k: Int, threads: Int, repeats: Int
    let compare: Bool, script: String?, json: Bool
    let append: Int?, computeUnits: ComputeUnits, device: Int?

    init(_ args: ParsedArguments) throws {
        let spec = args.value("sizes") ?? "10000x128,100000x128,1000000x128,10000x1000,100000x1000"
        sizes = try spec.split(separator: ",").map { item in
            let parts = item.lowercased().split(separator: "x").compactMap { Int($0) }
            guard parts.count == 2, parts[0] >= 1, parts[1] >= 1 else { throw UsageError("--sizes takes NxD,..., got '\(item)'") }
            return Size(n: parts[0], d: parts[1])
        }
        k = try args.int("k") ?? 10
        batches = try (args.value("batches") ?? "1,256").split(separator: ",").map {
            guard let b = Int($0), (1...256).contains(b) else { throw UsageError("--batches takes sizes in 1...256, got '\($0)'") }
            return b
        }
        threads = try args.int("threads") ?? HostInfo.usableCores
        repeats = max(1, try args.int("repeat") ?? 3)
        compare = args.flag("compare")
        script = args.value("script")
        json = args.flag("json")
        device = try args.int("device")
        append = try args.int("append")
        if let a = append, a < 1 { throw UsageError("--append must be at least 1, got \(a)") }
        let units = args.value("compute-units") ?? "cpuOnly"
        guard let cu = ComputeUnits(rawValue: units) else { throw UsageError("--compute-units is cpuOnly, cpuAndGPU or all, got '\(units)'") }
        computeUnits = cu
        guard k >= 1, threads >= 1 else { throw UsageError("--k and --threads must be at least 1") }
    }

    static func random(_ count: Int, seed: UInt64) -> [Float] {
        var rng = SplitMix64(seed: seed)
        return (0..<count).map { _ in rng.nextFloat(in: -1...1) }
    }

    func run() throws -> Int32 {
        var rows: [Row] = []
        var notes: [String] = []
        if !json { print("exact k-NN search, k = \(k), \(threads) threads; queries/s (best of \(repeats))") }
        for size in sizes {
            let samples = Self.random(size.n * size.d, seed: UInt64(size.n * 31 + size.d))
            let queries = Self.random(256 * size.d, seed: 7)
            let search = NeighborSearch(samples: samples, dimension: size.d, threads: threads)
            if let index = device {
                guard let found = try OpenCLRuntime.devices().first(where: { $0.info.index == index }) else {
                    throw UsageError("--device \(index) names no OpenCL device (see `updraft devices`)")
                }
                try search.attach(try OpenCLBackend(device: found))
                if !json { print("  batches' products on \(search.deviceName)") }
            }
            let checked = check(search, samples: samples, queries: queries, d: size.d)
            if !checked { notes.append("\(size.n)x\(size.d): Updraft's neighbours differ from the plain loop") }
            var baseline: [String: Any] = [:]
            if compare { baseline = runBaseline(samples: samples, queries: queries, size: size, notes: &notes) }
            for b in batches {
                let rate = time(search, queries: queries, batch: b, d: size.d)
                let f = (baseline["faiss"] as? [String: Any]).flatMap { $0["queries_per_second"] as? [String: Double] }?[String(b)]
                let s = (baseline["sklearn"] as? [String: Any]).flatMap { $0["queries_per_second"] as? [String: Double] }?[String(b)]
                let row = Row(samples: size.n, dimension: size.d, batch: b, queriesPerSecond: rate, faiss: f, sklearn: s,
                              bytesPerSample: 4 * size.d + 8, checked: checked,
                              baselinesAgree: compare ? agrees(baseline, search: search, queries: queries, d: size.d) : nil)
                rows.append(row)
                if !json {
                    var line = String(format: "  N %8d  D %5d  batch %3d: %10.1f q/s", size.n, size.d, b, rate)
                    if let f { line += String(format: "   faiss %10.1f (%.2fx)", f, rate / f) }
                    if let s { line += String(format: "   sklearn %10.1f (%.2fx)", s, rate / s) }
                    print(line + (checked ? "" : "   NOT EXACT"))
                }
            }
        }
        var appendFigures: AppendFigures?
        if let count = append {
            appendFigures = try timeAppend(count, notes: &notes)
            if !json, let a = appendFigures {
                print(String(format: "append through SqueezeNet 1.1 (227x227, batch 64, %@): %.1f images/s on %@", computeUnits.rawValue,
                             a.imagesPerSecond, a.device)
                      + (a.pytorch.map { String(format: "; PyTorch %.1f images/s: %.2fx (target 3x)", $0, a.imagesPerSecond / $0) } ?? ""))
            }
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(Report(search: rows, append: appendFigures)), as: UTF8.self))
        } else {
            print("memory: 4·D + 8 bytes per stored sample (the sample and its kept squared norm)")
        }
        for note in notes { FileHandle.standardError.write(Data("note: \(note)\n".utf8)) }
        return rows.allSatisfy(\.checked) ? 0 : 1
    }

    /// Updraft's neighbours for 4 queries against the plain Double loop.
    func check(_ search: NeighborSearch, samples: [Float], queries: [Float], d: Int) -> Bool {
        let q = Array(queries.prefix(4 * d))
        let found = search.search(q, k: k) + (0..<4).map { search.search(Array(q[$0 * d..<($0 + 1) * d]), k: k)[0] }
        return samples.withUnsafeBufferPointer { x in
            q.withUnsafeBufferPointer { qs in
                (0..<8).allSatisfy { i in
                    let query = qs.baseAddress! + (i % 4) * d
                    var all = (0..<search.count).map { NeighborMatch(sample: $0, squaredDistance: NeighborSearch.exactDistance(query, x.baseAddress! + $0 * d, dimension: d)) }
                    all.sort { $0.precedes($1) }
                    return Array(all.prefix(k)) == found[i]
                }
            }
        }
    }

    /// Queries per second for batches of `batch` (a single query: 16 different ones, timed together).
    func time(_ search: NeighborSearch, queries: [Float], batch: Int, d: Int) -> Double {
        var best = Double.infinity
        let calls = batch == 1 ? 16 : 1
        for _ in 0..<repeats {
            let start = DispatchTime.now().uptimeNanoseconds
            for c in 0..<calls { _ = search.search(Array(queries[(c * batch) * d..<(c * batch + batch) * d]), k: k) }
            best = min(best, Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
        }
        return Double(calls * batch) / best
    }

    /// Writes the data as .npy and runs the baseline script; its JSON, or empty with a note.
    func runBaseline(samples: [Float], queries: [Float], size: Size, notes: inout [String]) -> [String: Any] {
        guard let path = PyTorchComparison.locateScript(explicit: script, name: "knn_baseline.py") else {
            notes.append("comparison skipped: Benchmarks/knn_baseline.py not found (give --script PATH)")
            return [:]
        }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("updraft-knn-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        do {
            try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
            let x = dir.appendingPathComponent("samples.npy"), q = dir.appendingPathComponent("queries.npy")
            try NpyArray(shape: [size.n, size.d], descr: "<f4", values: .float(samples)).serialized().write(to: x)
            try NpyArray(shape: [256, size.d], descr: "<f4", values: .float(queries)).serialized().write(to: q)
            let child = try runChild(executable: "/usr/bin/env", arguments: ["python3", path, "--samples", x.path, "--queries", q.path,
                                                                              "--k", String(k), "--threads", String(threads), "--repeat", String(repeats),
                                                                              "--batches", batches.map(String.init).joined(separator: ",")],
                                     captureStandardError: true)
            guard child.status == 0, let object = try JSONSerialization.jsonObject(with: Data(child.standardOutput.utf8)) as? [String: Any] else {
                notes.append("\(size.n)x\(size.d): the baseline script failed: \(child.standardError.suffix(300))")
                return [:]
            }
            for lib in ["faiss", "sklearn"] {
                if let e = (object[lib] as? [String: Any])?["error"] as? String { notes.append("\(size.n)x\(size.d): \(lib) not run: \(e)") }
            }
            return object
        } catch {
            notes.append("\(size.n)x\(size.d): the baseline could not run: \(error)")
            return [:]
        }
    }

    /// Whether faiss and scikit-learn found Updraft's neighbours for the checked queries (as sets: a
    /// float search may order near-ties differently).
    func agrees(_ baseline: [String: Any], search: NeighborSearch, queries: [Float], d: Int) -> Bool? {
        guard let found = baseline["neighbors"] as? [String: [[Int]]], !found.isEmpty else { return nil }
        let mine = search.search(Array(queries.prefix(4 * d)), k: k).map { Set($0.map(\.sample)) }
        return found.values.allSatisfy { lists in zip(lists, mine).allSatisfy { Set($0) == $1 } }
    }
}

extension KnnBench {
    /// Images appended per second through the extractor, and PyTorch's extraction rate beside it.
    struct AppendFigures: Codable {
        var images: Int, imagesPerSecond: Double, device: String, pytorch: Double?
    }

    struct Report: Codable {
        var search: [Row]
        var append: AppendFigures?
    }

    /// Synthetic images labelled "0"..."9": the labels an update reads (`KNearestNeighborsExampleSource`).
    struct LabelledImages: BatchProvider, KNearestNeighborsExampleSource, @unchecked Sendable {
        let images: SyntheticImageDataset
        var count: Int { images.count }
        func example(at index: Int) throws -> TrainingExample { try images.example(at: index) }
        func labels(in range: Range<Int>) throws -> ClassLabels {
            .strings(try range.map { i -> String in
                guard case let .classIndex(c) = try images.example(at: i).target else { return "?" }
                return String(c)
            })
        }
        func examples(in range: Range<Int>) throws -> (vectors: Tensor, labels: ClassLabels) {
            let b = try images.batch(at: range)
            return (b.inputs.reshaped(Shape([range.count, b.inputs.count / max(1, range.count)])), try labels(in: range))
        }
    }

    /// An update task appending `count` images through the extractor, and PyTorch's extraction beside it.
    func timeAppend(_ count: Int, notes: inout [String]) throws -> AppendFigures {
        let network = try SqueezeNet.build(SqueezeNet.Options(labels: (0..<10).map(String.init), seed: 0, inputSize: 227))
        let pipeline = try NearestNeighborsPipeline(neighbors: 1).make(featureExtractor: network)
        let data = LabelledImages(images: try SyntheticImageDataset(count: count, itemShape: [3, 227, 227], classes: 10, seed: 1))
        var config = UpdateConfiguration()
        config.placement.computeUnits = computeUnits
        config.parameters[.miniBatchSize] = .int(64)
        let task = UpdateTask(model: pipeline, trainingData: data, configuration: config)
        let start = DispatchTime.now().uptimeNanoseconds
        let ctx = task.run()
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        if let e = ctx.error { throw e }
        notes += task.warnings
        var figures = AppendFigures(images: count, imagesPerSecond: Double(count) / seconds, device: ctx.metrics?.device ?? "cpu", pytorch: nil)
        if let script = PyTorchComparison.locateScript(explicit: nil, name: "knn_extract_pytorch.py"),
           let child = try? runChild(executable: "/usr/bin/env", arguments: ["python3", script, "--images", String(count), "--batch", "64",
                                                                              "--threads", String(threads)], captureStandardError: true),
           let object = try? JSONSerialization.jsonObject(with: Data(child.standardOutput.utf8)) as? [String: Any] {
            if let rate = object["images_per_second"] as? Double { figures.pytorch = rate } else { notes.append("PyTorch extraction not run: \(object["error"] ?? "no figure")") }
        } else {
            notes.append("PyTorch extraction not run: Benchmarks/knn_extract_pytorch.py not found or failed")
        }
        return figures
    }
}
