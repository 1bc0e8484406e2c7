import Foundation
import UpdraftCore
import UpdraftModel
import UpdraftData

/// The `.resume` state file: a magic line, a JSON header (position, settings, fingerprints, history,
/// the tensors' names and sizes), the tensors' float32 values (little-endian: values, then one array per
/// state slot the optimizer declares, in its `stateSlots` order), and a 64-bit hash of everything before it.
/// Numbers that must come back bit for bit (hyperparameters, running sums, seeds) are written as
/// hexadecimal bit patterns, not as JSON numbers. Written atomically (a temporary file, then a rename).
enum CheckpointFile {
    static let magic = Array("UPDRAFT-RESUME\n".utf8)
    static let version = 1

    /// `secondMoment`: true when the optimizer keeps more than one state array (format 1 wrote it for
    /// Adam's v). The reader takes the number of state arrays from the optimizer and checks it against this.
    struct TensorEntry: Codable { var name: String; var count: Int; var secondMoment: Bool }
    struct Position: Codable {
        var epoch: Int, miniBatch: Int, steps: Int, correct: Int, seen: Int
        var lossSum: String, lastLoss: String, batchLosses: [String]
    }
    struct Header: Codable {
        var version: Int
        var modelFingerprint: String
        var dataCount: Int, dataTargets: String, dataNames: String?, dataSamples: String
        var optimizer: String
        var parameters: [String: String]
        var shortLastBatch: Bool
        /// Absent in files written before it was kept: false.
        var frozenActivationsHalfPrecision: Bool?
        var horizontalFlip: Bool, verticalFlip: Bool, augmentationSeed: String
        /// The random resized crop's area range, as two bit patterns (absent: no crop).
        var randomResizedCrop: [String]?
        var checkpointEvery: Int?, checkpointEveryMiniBatches: Int?
        var dataParallelShares: [String]?
        var device: String
        var position: Position
        var history: [TrainingMetrics]
        var stepCount: Int
        var tensors: [TensorEntry]
    }

    static func hex(_ v: UInt64) -> String { String(v, radix: 16) }
    static func hex(_ d: Double) -> String { hex(d.bitPattern) }
    static func bits(_ s: String, _ what: String) throws -> UInt64 {
        guard let v = UInt64(s, radix: 16) else { throw damaged("\(what) '\(s)' is not a hexadecimal number") }
        return v
    }
    static func double(_ s: String, _ what: String) throws -> Double { Double(bitPattern: try bits(s, what)) }

    static func damaged(_ why: String) -> UpdraftError {
        UpdraftError(.io, "the resume state is damaged: \(why)",
                     hint: "resume from an earlier checkpoint, or start the run again")
    }

    static func encode(_ value: ParameterValue) -> String {
        switch value {
        case let .double(d): return "d:" + hex(d)
        case let .int(i): return "i:\(i)"
        case let .bool(b): return "b:\(b)"
        }
    }

    static func decode(_ text: String, key: String) throws -> ParameterValue {
        let body = String(text.dropFirst(2))
        switch text.prefix(2) {
        case "d:": return .double(try double(body, key))
        case "i:": if let i = Int64(body) { return .int(i) }
        case "b:": if body == "true" || body == "false" { return .bool(body == "true") }
        default: break
        }
        throw damaged("the value of \(key) is '\(text)'")
    }

    static func jsonEncoder() -> JSONEncoder {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        e.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return e
    }

    static func jsonDecoder() -> JSONDecoder {
        let d = JSONDecoder()
        d.nonConformingFloatDecodingStrategy = .convertFromString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return d
    }

    // MARK: Writing

    static func encoded(_ c: TrainingCheckpoint) throws -> Data {
        let p = c.position
        let header = Header(
            version: version, modelFingerprint: hex(c.modelFingerprint),
            dataCount: c.data.count, dataTargets: hex(c.data.targets), dataNames: c.data.names.map { hex($0) },
            dataSamples: hex(c.data.samples), optimizer: c.optimizer.rawValue,
            parameters: c.parameters.values.reduce(into: [:]) { $0[$1.key.rawValue] = encode($1.value) },
            shortLastBatch: c.shortLastBatch, frozenActivationsHalfPrecision: c.frozenActivationsHalfPrecision,
            horizontalFlip: c.augmentation.horizontalFlip,
            verticalFlip: c.augmentation.verticalFlip, augmentationSeed: hex(c.augmentation.seed),
            randomResizedCrop: c.augmentation.randomResizedCrop.map { [hex($0.lowerBound), hex($0.upperBound)] },
            checkpointEvery: c.checkpointEvery, checkpointEveryMiniBatches: c.checkpointEveryMiniBatches,
            dataParallelShares: c.dataParallelShares?.map { hex($0) }, device: c.device,
            position: Position(epoch: p.epoch, miniBatch: p.miniBatch, steps: p.steps, correct: p.correct, seen: p.seen,
                               lossSum: hex(p.lossSum), lastLoss: hex(p.lastLoss), batchLosses: p.batchLosses.map { hex($0) }),
            history: c.history, stepCount: c.state.stepCount,
            tensors: c.state.tensors.map { TensorEntry(name: $0.name, count: $0.values.count, secondMoment: $0.state.count > 1) })
        let json = try jsonEncoder().encode(header)
        var bytes = magic
        appendWord(UInt64(json.count), to: &bytes)
        bytes += json
        for t in c.state.tensors {
            for array in [t.values] + t.state {
                array.withUnsafeBytes { bytes += $0 }   // float32, little-endian on every platform Updraft runs on
            }
        }
        var h = FingerprintHasher()
        h.add(bytes)
        appendWord(h.value, to: &bytes)
        return Data(bytes)
    }

    static func appendWord(_ v: UInt64, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: v.littleEndian) { bytes += $0 }
    }

    // MARK: Reading

    static func read(from url: URL) throws -> TrainingCheckpoint {
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw UpdraftError(.io, "cannot read the resume state \(url.path)", hint: "check that the file exists and is readable")
        }
        do {
            return try decode([UInt8](data))
        } catch let e as UpdraftError {
            throw UpdraftError(e.kind, "\(url.lastPathComponent): \(e.message)", hint: e.hint)
        }
    }

    static func decode(_ bytes: [UInt8]) throws -> TrainingCheckpoint {
        guard bytes.starts(with: magic) else {
            throw UpdraftError(.io, "not an Updraft resume state (it does not start with \"UPDRAFT-RESUME\")",
                               hint: "pass the checkpoint model; its state is the .resume file beside it")
        }
        guard bytes.count >= magic.count + 16 else { throw damaged("it is cut short (\(bytes.count) bytes)") }
        var h = FingerprintHasher()
        h.add(Array(bytes[..<(bytes.count - 8)]))
        guard word(bytes, at: bytes.count - 8) == h.value else {
            throw damaged("its checksum does not match (cut short, or changed after it was written)")
        }
        let length = word(bytes, at: magic.count)
        let jsonStart = magic.count + 8
        guard length <= UInt64(bytes.count - 8 - jsonStart) else { throw damaged("its header runs past the end") }
        let jsonEnd = jsonStart + Int(length)
        let header: Header
        do {
            let probe = try JSONSerialization.jsonObject(with: Data(bytes[jsonStart..<jsonEnd])) as? [String: Any]
            if let v = probe?["version"] as? Int, v > version {
                throw UpdraftError(.unsupported, "the resume state was written by a newer Updraft (format \(v); this one reads \(version))",
                                   hint: "resume with the Updraft that wrote it")
            }
            header = try jsonDecoder().decode(Header.self, from: Data(bytes[jsonStart..<jsonEnd]))
        } catch let e as UpdraftError {
            throw e
        } catch {
            throw damaged("its header cannot be read (\(error))")
        }
        var offset = jsonEnd
        func floats(_ count: Int, _ what: String) throws -> [Float] {
            guard count >= 0, count <= (bytes.count - 8 - offset) / 4 else { throw damaged("\(what) runs past the end") }
            let values = bytes[offset..<offset + 4 * count].withUnsafeBytes { raw in
                (0..<count).map { raw.loadUnaligned(fromByteOffset: 4 * $0, as: Float.self) }
            }
            offset += 4 * count
            return values
        }
        guard let optimizer = OptimizerKind(rawValue: header.optimizer) else { throw damaged("unknown optimizer '\(header.optimizer)'") }
        let slots = optimizer.optimizerType.stateSlots.count
        var tensors: [ExecutorState.TensorState] = []
        for t in header.tensors {
            guard t.secondMoment == (slots > 1) else {
                throw damaged("\(t.name) \(t.secondMoment ? "holds" : "lacks") a second state array; \(optimizer.optimizerType.name) keeps \(slots)")
            }
            let values = try floats(t.count, t.name)
            let state = try (0..<slots).map { _ in try floats(t.count, t.name) }
            tensors.append(ExecutorState.TensorState(name: t.name, values: values, state: state))
        }
        guard offset == bytes.count - 8 else { throw damaged("\(bytes.count - 8 - offset) bytes follow the last tensor") }

        var overrides: [ParameterKey: ParameterValue] = [:]
        for (name, text) in header.parameters {
            guard let key = ParameterKey(rawValue: name) else { throw damaged("unknown parameter '\(name)'") }
            // Files keep every key's value, the other optimizer's defaults too; the run has only its own.
            if TrainingParameters.otherOptimizer(owning: key, besides: optimizer) != nil { continue }
            overrides[key] = try decode(text, key: name)
        }
        let parameters = try TrainingParameters(optimizer: optimizer, hyperparameters: [], overrides: overrides)
        let p = header.position
        var position = TrainingPosition()
        position.epoch = p.epoch; position.miniBatch = p.miniBatch; position.steps = p.steps
        position.correct = p.correct; position.seen = p.seen
        position.lossSum = try double(p.lossSum, "lossSum"); position.lastLoss = try double(p.lastLoss, "lastLoss")
        position.batchLosses = try p.batchLosses.map { try double($0, "a mini-batch loss") }
        guard p.epoch >= 0, p.miniBatch >= 0, p.steps >= 0, p.steps == header.stepCount else {
            throw damaged("its position (epoch \(p.epoch), mini-batch \(p.miniBatch), step \(p.steps) of \(header.stepCount)) does not add up")
        }
        var crop: ClosedRange<Double>? = nil
        if let bounds = header.randomResizedCrop {
            let values = try bounds.map { try double($0, "randomResizedCrop") }
            guard values.count == 2, values[0] <= values[1] else { throw damaged("its random resized crop is \(values)") }
            crop = values[0]...values[1]
        }
        let data = DataFingerprint(count: header.dataCount, targets: try bits(header.dataTargets, "dataTargets"),
                                   names: try header.dataNames.map { try bits($0, "dataNames") },
                                   samples: try bits(header.dataSamples, "dataSamples"))
        return TrainingCheckpoint(
            modelFingerprint: try bits(header.modelFingerprint, "modelFingerprint"), data: data, optimizer: optimizer,
            parameters: parameters, shortLastBatch: header.shortLastBatch,
            augmentation: ImageAugmentation(horizontalFlip: header.horizontalFlip, verticalFlip: header.verticalFlip,
                                            randomResizedCrop: crop, seed: try bits(header.augmentationSeed, "augmentationSeed")),
            frozenActivationsHalfPrecision: header.frozenActivationsHalfPrecision ?? false,
            checkpointEvery: header.checkpointEvery, checkpointEveryMiniBatches: header.checkpointEveryMiniBatches,
            dataParallelShares: try header.dataParallelShares?.map { try double($0, "a data-parallel share") },
            device: header.device, position: position, history: header.history,
            state: ExecutorState(stepCount: header.stepCount, tensors: tensors))
    }

    static func word(_ bytes: [UInt8], at offset: Int) -> UInt64 {
        bytes[offset..<offset + 8].withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
    }
}

extension TrainingCheckpoint {
    /// Writes the state file for the checkpoint model `model` (`url(forModel:)`), atomically.
    public func write(forModel model: URL) throws {
        try writeAtomically(try CheckpointFile.encoded(self), to: Self.url(forModel: model))
    }
}
