import Foundation

/// What a progress event reports. At miniBatchEnd: the batch's loss and index. At epochEnd: the
/// epoch's mean training loss, the last batch's loss (what Core ML reports as lossValue), training
/// accuracy, and validation loss and accuracy when a validation set was given.
public struct TrainingMetrics: Codable, Equatable, Sendable {
    public var epochIndex: Int
    public var miniBatchIndex: Int?
    /// Core ML's lossValue: the last mini-batch's loss.
    public var lossValue: Double
    public var meanLoss: Double?
    public var trainingAccuracy: Double?
    public var validationLoss: Double?
    public var validationAccuracy: Double?
    /// Examples trained per second over the epoch (wall clock).
    public var examplesPerSecond: Double?
    public var seconds: Double?
    /// Where the epoch ran, e.g. "cpu" or "opencl:NVIDIA H200".
    public var device: String?
    /// Every mini-batch's loss in the epoch, in order (kept in the training history, for plots).
    public var miniBatchLosses: [Double]?

    public init(epochIndex: Int, miniBatchIndex: Int? = nil, lossValue: Double) {
        self.epochIndex = epochIndex; self.miniBatchIndex = miniBatchIndex; self.lossValue = lossValue
    }
}

/// Every epoch's metrics, saved next to the output model as `<model>.history.json`.
public struct TrainingHistory: Codable, Equatable, Sendable {
    public var model: String
    public var parameters: [String: String]
    public var epochs: [TrainingMetrics]

    public init(model: String, parameters: [String: String], epochs: [TrainingMetrics] = []) {
        self.model = model; self.parameters = parameters; self.epochs = epochs
    }

    /// The history file that belongs to a model file: `out.mlmodel` -> `out.history.json`.
    public static func url(forModel model: URL) -> URL {
        model.deletingPathExtension().appendingPathExtension("history.json")
    }

    public func write(to url: URL) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try writeAtomically(try encoder.encode(self), to: url)
    }

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

/// Writes `data` to `url` through a temporary file in the same folder and a rename, so a crash
/// mid-write never leaves a half-written file where the old one was.
public func writeAtomically(_ data: Data, to url: URL) throws {
    let dir = url.deletingLastPathComponent()
    let tmp = dir.appendingPathComponent(".\(url.lastPathComponent).\(ProcessInfo.processInfo.processIdentifier).\(UInt32.random(in: 0...UInt32.max)).tmp")
    do {
        try data.write(to: tmp)
        if rename(tmp.path, url.path) != 0 {
            let reason = String(cString: strerror(errno))
            throw UpdraftError(.io, "cannot move \(tmp.lastPathComponent) to \(url.path): \(reason)")
        }
    } catch let e as UpdraftError {
        try? FileManager.default.removeItem(at: tmp)
        throw e
    } catch {
        try? FileManager.default.removeItem(at: tmp)
        throw UpdraftError(.io, "cannot write \(url.path): \(error.localizedDescription)",
                           hint: "check that the folder \(dir.path) exists and is writable")
    }
}

/// Appends one JSON object per line (JSON Lines) for each training event.
public final class JSONLinesLog {
    private let handle: FileHandle
    public let url: URL

    public init(url: URL) throws {
        guard FileManager.default.createFile(atPath: url.path, contents: nil),
              let h = try? FileHandle(forWritingTo: url) else {
            throw UpdraftError(.io, "cannot create log file \(url.path)", hint: "check the folder exists and is writable")
        }
        self.url = url
        self.handle = h
    }

    deinit { try? handle.close() }

    /// Writes `{"event":name,...fields}` as one line: the event first, then the fields in sorted order.
    public func write(event: String, _ fields: [String: Any]) {
        guard let body = try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]),
              let name = try? JSONSerialization.data(withJSONObject: [event], options: []) else { return }
        // name is ["<event>"]; body is {...}
        var line = Data("{\"event\":".utf8) + name.dropFirst().dropLast()
        if body.count > 2 { line += Data(",".utf8) + body.dropFirst() } else { line += Data("}".utf8) }
        handle.write(line + Data([0x0A]))
    }
}
