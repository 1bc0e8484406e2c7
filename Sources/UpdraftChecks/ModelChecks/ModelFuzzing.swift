import Foundation
import UpdraftCore
import UpdraftModel
import UpdraftLayers
import UpdraftPlacement

/// Mutated models through everything that reads a model before training: the protobuf reader, the
/// validator (`inspect`), graph building and the planner. The test suite runs a few hundred with
/// fixed seeds; `make fuzz` (`updraft-bench fuzz`) runs 100,000 in a memory-limited child process.
/// What must hold for every input: no crash or trap, a named error or a result, and agreement
/// between the validator and the planner — a model the validator calls valid plans at its default
/// mini-batch size.
public enum ModelFuzzing {
    /// What one mutated model did.
    public enum Outcome: String, CaseIterable, Sendable {
        /// The reader refused it (a named error with an offset).
        case unreadable
        /// Read, but the validator reports errors.
        case invalid
        /// Read, valid, and planned at its default mini-batch size (and a few others).
        case planned
    }

    /// Something that must not happen (a trap is found by the process dying instead).
    public struct Violation: Error, CustomStringConvertible, Sendable {
        /// The model's index in the sequence (`run(index:seed:seeds:)`); with the run's seed it rebuilds the same mutated model.
        public var index: Int
        /// What went wrong: which check disagreed with the validator, and the error it threw.
        public var message: String
        /// "model N: message".
        public var description: String { "model \(index): \(message)" }
    }

    /// Small updatable models of every layer kind Updraft runs, as bytes: the starting points.
    public static func seedModels() throws -> [[UInt8]] {
        var models: [CoreMLModel] = []
        // Dense classifier on a multi-array.
        var d = try ModelBuilder(input: FeatureDescription(name: "x", type: .multiArray(.init(shape: [6], dataType: .double))), seed: 1)
        try d.innerProduct("dense1", outputChannels: 5)
        try d.activation("tanh", .tanh)
        try d.innerProduct("dense2", outputChannels: 3)
        try d.softmax("probabilities")
        try d.makeClassifier(labels: .strings(["a", "b", "c"]), probabilities: "probabilities")
        try d.makeUpdatable(["dense1", "dense2"])
        try d.setCrossEntropyLoss(input: "probabilities")
        d.setOptimizer(.adam(learningRate: 0.01, miniBatchSize: 4))
        d.setEpochs(2)
        models.append(try d.build())
        // Image classifier: convolution, pooling, a fire-like branch with concat, batchnorm, add, flatten.
        let image = ImageFeatureType(width: 12, height: 12, colorSpace: .rgb)
        var c = try ModelBuilder(input: FeatureDescription(name: "image", type: .image(image)), seed: 2)
        try c.convolution("conv1", outputChannels: 4, kernel: (3, 3), stride: (2, 2), padding: .same(.bottomRightHeavy))
        try c.batchnorm("bn", gamma: [1, 1, 1, 1], beta: [0, 0, 0, 0], mean: [0, 0, 0, 0], variance: [1, 1, 1, 1])
        let squeezed = try c.activation("relu1", .relu)
        let left = try c.convolution("expand1x1", input: squeezed, outputChannels: 3, kernel: (1, 1))
        let right = try c.convolution("expand3x3", input: squeezed, outputChannels: 3, kernel: (3, 3), padding: .same(.bottomRightHeavy))
        let sum = try c.add("sum", inputs: [left, right])
        try c.concat("cat", inputs: [sum, left])
        try c.pooling("pool", .max, kernel: (2, 2), stride: (2, 2))
        try c.flatten("flatten")
        try c.innerProduct("fc", outputChannels: 2)
        try c.softmax("probabilities")
        try c.makeClassifier(labels: .int64([0, 1]), probabilities: "probabilities")
        try c.makeUpdatable(["expand3x3", "fc"])
        try c.setCrossEntropyLoss(input: "probabilities")
        c.setOptimizer(.sgd(learningRate: 0.1, miniBatchSize: 8, momentum: 0.9))
        c.setEpochs(3)
        models.append(try c.build())
        // Regressor with mean squared error.
        var r = try ModelBuilder(input: FeatureDescription(name: "x", type: .multiArray(.init(shape: [2, 4, 4], dataType: .float32))), seed: 3)
        try r.convolution("conv", outputChannels: 2, kernel: (2, 2))
        try r.pooling("avg", .average, global: true)
        try r.flatten("flat")
        try r.innerProduct("out", outputChannels: 2)
        try r.addOutput("out")
        r.makeRegressor()
        try r.makeUpdatable(["conv", "out"])
        try r.setMeanSquaredErrorLoss(input: "out")
        r.setOptimizer(.sgd(learningRate: 0.01, miniBatchSize: 2))
        r.setEpochs(1)
        models.append(try r.build())
        return models.map { $0.serializedBytes() }
    }

    /// Runs model `index` of the sequence `seed` (mutated from one of `seeds`) through the reader,
    /// the validator, the report, graph building and the planner.
    /// - Throws: a `Violation` when the validator calls a model valid that the planner then refuses.
    public static func run(index: Int, seed: UInt64, seeds: [[UInt8]]) throws -> Outcome {
        var mutator = ModelMutator(seed: seed &+ UInt64(index) &* 0x9E37_79B9_7F4A_7C15)
        let base = seeds[Int(mutator.next() % UInt64(seeds.count))]
        let bytes = mutator.mutate(base)
        return try check(bytes, index: index, batches: [1 + Int(mutator.next() % 4096), Int(truncatingIfNeeded: mutator.next())])
    }

    /// The checks on one model's bytes (see `run`); `batches` are extra batch sizes to plan with.
    public static func check(_ bytes: [UInt8], index: Int = 0, batches: [Int] = []) throws -> Outcome {
        guard let model = try? CoreMLModel(serializedBytes: bytes) else { return .unreadable }
        let report = ModelReport(model: model)
        _ = report.text()
        let valid = !report.findings.contains { $0.severity == "error" }
        let host = DeviceProfile(name: "fuzz host", kind: .cpu, openCLIndex: nil, fmaGFLOPS: 50, bandwidthGBps: 20,
                                 launchLatencyMicroseconds: 5, memoryBytes: 16 << 30, transferGBps: 10)
        let graph: NetworkGraph
        do { graph = try NetworkGraph(model: model) } catch {
            if valid { throw Violation(index: index, message: "valid by the validator, but the graph fails: \(error)") }
            return .invalid
        }
        let defaultBatch = graph.updateParameters?.optimizer?.miniBatchSize.map { Int(clamping: $0.defaultValue) }
        for batch in batches + [1] {
            _ = try? Scheduler.plan(graph: graph, batchSize: batch, computeUnits: .cpuOnly, devices: [host])
        }
        guard valid else { return .invalid }
        if let defaultBatch {
            do {
                _ = try Scheduler.plan(graph: graph, batchSize: defaultBatch, computeUnits: .cpuOnly, devices: [host])
                _ = try TrainingGraph(graph: graph)
            } catch {
                throw Violation(index: index, message: "valid by the validator, but plan at its default mini-batch \(defaultBatch) fails: \(error)")
            }
        }
        return .planned
    }
}

/// Seeded mutations of a serialized model: byte-level (flips, inserts, deletions, truncation) and
/// protobuf-aware (a field somewhere in the message tree deleted, duplicated, swapped, or given an
/// interesting value: 0, -1, 2^31, 2^62, NaN, a truncated or random payload).
public struct ModelMutator {
    private var rng: SplitMix64

    /// A mutator whose choices are fixed by `seed`: the same seed gives the same mutations.
    public init(seed: UInt64) { rng = SplitMix64(seed: seed) }

    /// The next raw value of the mutator's SplitMix64 stream (advances it).
    public mutating func next() -> UInt64 { rng.next() }
    private mutating func below(_ n: Int) -> Int { n <= 1 ? 0 : Int(rng.next() % UInt64(n)) }

    static let interesting: [UInt64] = [
        0, 1, 2, 3, 4, 7, 8, 16, 255, 256, 1000, 65_535, 65_536, 1 << 24, (1 << 24) + 1, (1 << 31) - 1, 1 << 31, 1 << 32,
        1 << 46, 1 << 62, UInt64(Int64.max), UInt64.max, UInt64(bitPattern: -2), UInt64(bitPattern: -8),
    ]
    static let interestingFloats: [Float] = [0, -0, 1, -1, .nan, .infinity, -.infinity, .greatestFiniteMagnitude, .leastNonzeroMagnitude, 1e30]

    /// 1 to 4 mutations of `bytes`.
    public mutating func mutate(_ bytes: [UInt8]) -> [UInt8] {
        var b = bytes
        for _ in 0...below(4) {
            if below(4) == 0 { b = mutateBytes(b) } else { b = mutateStructure(b) }
        }
        return b
    }

    private mutating func mutateBytes(_ bytes: [UInt8]) -> [UInt8] {
        var b = bytes
        guard !b.isEmpty else { return [UInt8(truncatingIfNeeded: rng.next())] }
        switch below(5) {
        case 0: b[below(b.count)] ^= UInt8(1 << below(8))
        case 1: b[below(b.count)] = UInt8(truncatingIfNeeded: rng.next())
        case 2:
            let at = below(b.count + 1)
            b.insert(contentsOf: (0..<1 + below(8)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }, at: at)
        case 3:
            let at = below(b.count), n = min(b.count - at, 1 + below(16))
            b.removeSubrange(at..<at + n)
        default: b.removeLast(below(b.count))
        }
        return b
    }

    private mutating func mutateStructure(_ bytes: [UInt8]) -> [UInt8] {
        guard let message = try? ProtoMessage(parsing: bytes), !message.fields.isEmpty else { return mutateBytes(bytes) }
        return mutate(message, depth: 0).serialized()
    }

    private mutating func mutate(_ message: ProtoMessage, depth: Int) -> ProtoMessage {
        var m = message
        guard !m.fields.isEmpty else { return m }
        let i = below(m.fields.count)
        let f = m.fields[i]
        // Down into a nested message most of the time, so deep fields (layer parameters) get hit.
        if f.wireType == .lengthDelimited, depth < 12, below(5) != 0,
           let inner = try? ProtoMessage(parsing: Array(f.payload)), !inner.fields.isEmpty {
            m.fields[i] = ProtoField(number: f.number, message: mutate(inner, depth: depth + 1))
            return m
        }
        switch below(7) {
        case 0, 1:
            m.fields[i] = ProtoField(number: f.number, varint: Self.interesting[below(Self.interesting.count)])
        case 2:
            m.fields.remove(at: i)
        case 3:
            m.fields.insert(f, at: below(m.fields.count + 1))
        case 4:
            let j = below(m.fields.count)
            m.fields.swapAt(i, j)
        case 5:
            switch f.wireType {
            case .fixed32: m.fields[i] = ProtoField(number: f.number, float: Self.interestingFloats[below(Self.interestingFloats.count)])
            case .varint: m.fields[i] = ProtoField(number: f.number, varint: f.scalar &+ UInt64(bitPattern: Int64(below(5) - 2)))
            default: m.fields[i] = ProtoField(number: f.number, bytes: (0..<below(12)).map { _ in UInt8(truncatingIfNeeded: rng.next()) })
            }
        default:
            // A payload cut short, or packed values with one changed.
            var payload = Array(f.payload)
            if !payload.isEmpty && below(2) == 0 { payload.removeLast(1 + below(payload.count)) }
            else if !payload.isEmpty { payload[below(payload.count)] = UInt8(truncatingIfNeeded: rng.next()) }
            m.fields[i] = f.wireType == .lengthDelimited ? ProtoField(number: f.number, bytes: payload)
                : ProtoField(number: f.number, varint: Self.interesting[below(Self.interesting.count)])
        }
        return m
    }
}
