import Foundation
import UpdraftCore
import UpdraftData

/// What a progress event reports. At miniBatchEnd: the batch's loss and index. At epochEnd: the
/// epoch's mean training loss, the last batch's loss (what Core ML reports as lossValue), training
/// accuracy, and validation loss and accuracy when a validation set was given.
public struct TrainingMetrics: Codable, Equatable, Sendable {
    /// The epoch the event belongs to, counting from 0 (Core ML's `MLMetricKey.epochIndex`).
    public var epochIndex: Int
    /// The mini-batch within the epoch, counting from 0, at miniBatchEnd (`MLMetricKey.miniBatchIndex`); nil at epochEnd.
    public var miniBatchIndex: Int?
    /// Core ML's lossValue: the last mini-batch's loss.
    public var lossValue: Double
    /// The mean training loss over the epoch's mini-batches (epochEnd only).
    public var meanLoss: Double?
    /// Fraction of training examples classified correctly over the epoch, 0...1 (cross-entropy models, epochEnd only).
    public var trainingAccuracy: Double?
    /// Mean loss on `validationData` after the epoch; nil without a validation set.
    public var validationLoss: Double?
    /// Fraction of validation examples classified correctly, 0...1; nil without a validation set or a cross-entropy loss.
    public var validationAccuracy: Double?
    /// Examples trained per second over the epoch (wall clock).
    public var examplesPerSecond: Double?
    /// Wall-clock seconds the epoch took (epochEnd only).
    public var seconds: Double?
    /// Where the epoch ran, e.g. "cpu" or "opencl:NVIDIA H200".
    public var device: String?
    /// Every mini-batch's loss in the epoch, in order (kept in the training history, for plots).
    public var miniBatchLosses: [Double]?

    /// Metrics with only the required fields; the optional ones are nil until set.
    public init(epochIndex: Int, miniBatchIndex: Int? = nil, lossValue: Double) {
        self.epochIndex = epochIndex; self.miniBatchIndex = miniBatchIndex; self.lossValue = lossValue
    }

    // JSON has no NaN or infinity: a non-finite number is written as null (and read back as NaN for
    // the loss, nil for the others), so a history with a diverged epoch still writes and reads.
    private enum CodingKeys: String, CodingKey {
        case epochIndex, miniBatchIndex, lossValue, meanLoss, trainingAccuracy, validationLoss, validationAccuracy,
             examplesPerSecond, seconds, device, miniBatchLosses
    }

    /// Reads a JSON object; a null or missing loss reads as NaN, a null mini-batch loss as NaN, other nulls as nil.
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        epochIndex = try c.decode(Int.self, forKey: .epochIndex)
        miniBatchIndex = try c.decodeIfPresent(Int.self, forKey: .miniBatchIndex)
        lossValue = try c.decodeIfPresent(Double.self, forKey: .lossValue) ?? .nan
        meanLoss = try c.decodeIfPresent(Double.self, forKey: .meanLoss)
        trainingAccuracy = try c.decodeIfPresent(Double.self, forKey: .trainingAccuracy)
        validationLoss = try c.decodeIfPresent(Double.self, forKey: .validationLoss)
        validationAccuracy = try c.decodeIfPresent(Double.self, forKey: .validationAccuracy)
        examplesPerSecond = try c.decodeIfPresent(Double.self, forKey: .examplesPerSecond)
        seconds = try c.decodeIfPresent(Double.self, forKey: .seconds)
        device = try c.decodeIfPresent(String.self, forKey: .device)
        miniBatchLosses = try c.decodeIfPresent([Double?].self, forKey: .miniBatchLosses)?.map { $0 ?? .nan }
    }

    /// Writes a JSON object, with each non-finite number as null and nil fields left out.
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        func put(_ v: Double?, _ key: CodingKeys) throws {
            guard let v else { return }
            if v.isFinite { try c.encode(v, forKey: key) } else { try c.encodeNil(forKey: key) }
        }
        try c.encode(epochIndex, forKey: .epochIndex)
        try c.encodeIfPresent(miniBatchIndex, forKey: .miniBatchIndex)
        try put(lossValue, .lossValue)
        try put(meanLoss, .meanLoss)
        try put(trainingAccuracy, .trainingAccuracy)
        try put(validationLoss, .validationLoss)
        try put(validationAccuracy, .validationAccuracy)
        try put(examplesPerSecond, .examplesPerSecond)
        try put(seconds, .seconds)
        try c.encodeIfPresent(device, forKey: .device)
        try c.encodeIfPresent(miniBatchLosses?.map { $0.isFinite ? $0 : nil }, forKey: .miniBatchLosses)
    }
}

/// Every epoch's metrics, saved next to the output model as `<model>.history.json`.
public struct TrainingHistory: Codable, Equatable, Sendable {
    /// The model file's name (last path component) the history belongs to.
    public var model: String
    /// The parameters the run used, key name to the value as printed (`"learningRate": "0.01"`, `"shuffle": "true"`).
    public var parameters: [String: String]
    /// Each epoch's metrics, in order (a resumed run's earlier epochs first).
    public var epochs: [TrainingMetrics]

    /// A history with the given parameters and epochs (none by default).
    public init(model: String, parameters: [String: String], epochs: [TrainingMetrics] = []) {
        self.model = model; self.parameters = parameters; self.epochs = epochs
    }

    /// The history file that belongs to a model file: `out.mlmodel` -> `out.history.json`.
    public static func url(forModel model: URL) -> URL {
        model.deletingPathExtension().appendingPathExtension("history.json")
    }

    /// Writes the history as pretty-printed JSON with sorted keys, atomically (`writeAtomically`). Throws `.io` when it cannot be written.
    public func write(to url: URL) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try writeAtomically(try encoder.encode(self), to: url)
    }

    /// Reads a history written by `write(to:)`. Throws `.io` when the file is missing or not a training history.
    public static func read(from url: URL) throws -> TrainingHistory {
        guard let data = FileManager.default.contents(atPath: url.path) else {
            throw UpdraftError(.io, "cannot read training history \(url.path): no such readable file",
                               hint: "`updraft train --out M.mlmodel` writes it next to the model as M.history.json")
        }
        do { return try JSONDecoder().decode(TrainingHistory.self, from: data) } catch {
            throw UpdraftError(.io, "\(url.path) is not a training history: \(error)",
                               hint: "pass the <model>.history.json file `updraft train` wrote")
        }
    }
}

/// Appends one JSON object per line (JSON Lines) for each training event. The file is opened for
/// appending (an existing log keeps its lines) and must be a regular file or a new path: a device,
/// a FIFO or a folder is refused rather than replaced. Numbers that are not finite are written as
/// null, so every event is written. When a write fails (a full disk), the log calls
/// `onWriteFailure` once and writes nothing more; training is not affected.
public final class JSONLinesLog {
    private let file: AppendOnlyFile
    /// The file the log appends to.
    public var url: URL { file.url }
    /// Called once, with a one-line message, when a write fails.
    public var onWriteFailure: ((String) -> Void)? {
        get { file.onWriteFailure }
        set { file.onWriteFailure = newValue }
    }

    /// - Parameter others: files the log must not be (the input model, the output): refused when
    ///   `url` names the same file, or the same path.
    public init(url: URL, notTheSameAs others: [URL] = []) throws {
        let path = url.path
        var st = stat()
        if stat(path, &st) == 0 {
            guard st.st_mode & S_IFMT == S_IFREG else {
                throw UpdraftError(.io, "the log \(path) exists and is \(fileKind(st.st_mode)), not a regular file",
                                   hint: "give --log a new file name, or an existing log to append to")
            }
        } else if errno != ENOENT {
            throw UpdraftError(.io, "cannot use \(path) as the log: \(String(cString: strerror(errno)))",
                               hint: "check the folder exists and is writable")
        }
        for other in others {
            var so = stat()
            let same = other.standardizedFileURL.path == url.standardizedFileURL.path
                || (stat(other.path, &so) == 0 && stat(path, &st) == 0 && so.st_dev == st.st_dev && so.st_ino == st.st_ino)
            if same {
                throw UpdraftError(.invalidArgument, "the log \(path) is the same file as \(other.path)",
                                   hint: "give --log a file of its own (the log would overwrite it)")
            }
        }
        let fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0o644)
        guard fd >= 0 else {
            throw UpdraftError(.io, "cannot open the log \(path): \(String(cString: strerror(errno)))",
                               hint: "check the folder exists and is writable")
        }
        // What was opened, checked again (the path may have changed since the check above).
        var opened = stat()
        guard fstat(fd, &opened) == 0, opened.st_mode & S_IFMT == S_IFREG else {
            close(fd)
            throw UpdraftError(.io, "the log \(path) is not a regular file", hint: "give --log a new file name")
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        file = AppendOnlyFile(fileDescriptor: fd, url: url, what: "the log")
    }

    /// A log on an open descriptor (tests: a descriptor whose writes fail).
    init(fileDescriptor: Int32, url: URL) {
        file = AppendOnlyFile(fileDescriptor: fileDescriptor, url: url, what: "the log")
    }

    /// Writes `{"event":name,"time":...,...fields}` as one line: the event and when it was written
    /// (UTC, ISO 8601 with milliseconds), then the fields in sorted order.
    public func write(event: String, _ fields: [String: Any]) {
        let body = (try? JSONSerialization.data(withJSONObject: jsonSafe(fields), options: [.sortedKeys]))
            ?? Data(#"{"unencodable":true}"#.utf8)
        let name = (try? JSONSerialization.data(withJSONObject: [event], options: [])) ?? Data(#"["event"]"#.utf8)
        // name is ["<event>"]; body is {...}
        var line = Data("{\"event\":".utf8) + name.dropFirst().dropLast()
        line += Data(",\"time\":\"\(Self.timestamp())\"".utf8)
        if body.count > 2 { line += Data(",".utf8) + body.dropFirst() } else { line += Data("}".utf8) }
        line.append(0x0A)
        line.withUnsafeBytes { file.append($0) }
    }
}

extension JSONLinesLog {
    /// Now (or `seconds` since 1970) as `2026-12-01T16:55:12.345Z`.
    static func timestamp(_ seconds: Double = Date().timeIntervalSince1970) -> String {
        var whole = time_t(seconds.rounded(.down))
        let millis = min(999, Int(((seconds - seconds.rounded(.down)) * 1000).rounded(.down)))
        var parts = tm()
        gmtime_r(&whole, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
                      Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), millis)
    }
}

/// The value with every non-finite number replaced by null (JSON has no NaN or infinity).
func jsonSafe(_ value: Any) -> Any {
    switch value {
    case let d as Double: return d.isFinite ? d : NSNull()
    case let f as Float: return f.isFinite ? Double(f) : NSNull()
    case let a as [Any]: return a.map(jsonSafe)
    case let o as [String: Any]: return o.mapValues(jsonSafe)
    default: return value
    }
}
