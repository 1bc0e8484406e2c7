import Foundation
import UpdraftCore

/// A JSON description of what Updraft believes a model file holds, written next to it so that an
/// outside reader (Tests/Scripts/check_interop.py, with coremltools) can check the file says the
/// same: model flags, class labels, loss, and for every convolution and inner-product layer its
/// updatable flags and a CRC-32 of its float32 weight and bias values (little-endian bytes).
public enum InteropSidecar {
    struct Values: Encodable {
        var count: Int
        var crc32: UInt32
        var isUpdatable: Bool
        var first: [Float]
    }
    struct Layer: Encodable {
        var name: String
        var type: String
        var isUpdatable: Bool
        var weights: Values?
        var bias: Values?
    }
    /// A k-NN classifier's samples (count, CRC-32, first values), labels, k and settings.
    struct NeighborsSummary: Encodable {
        var dimension: Int
        var samples: Int
        var crc32: UInt32
        var first: [Float]
        var labels: [String]
        var labelType: String?
        var k: Int64?
        var allowedRange: [Int64]?
        var allowedSet: [Int64]?
        var weighting: String?
        var index: String?
        var leafSize: Int32?
        var defaultLabel: String?
    }
    struct Document: Encodable {
        var specificationVersion: Int
        var isUpdatable: Bool
        var kind: String
        var classLabels: [String]?
        var loss: String?
        var layers: [Layer]
        var kNearestNeighbors: NeighborsSummary?
    }

    /// The sidecar for a model, from Updraft's in-memory view of it.
    public static func json(for model: CoreMLModel) throws -> String {
        var layers: [Layer] = []
        for l in model.layers {
            guard let (w, b) = l.weightParams else { continue }
            func values(_ p: WeightParams) -> Values {
                Values(count: p.values.count, crc32: crc32(floats: p.values), isUpdatable: p.isUpdatable,
                       first: Array(p.values.prefix(4)))
            }
            layers.append(Layer(name: l.name, type: l.typeName, isUpdatable: l.isUpdatable,
                                weights: w.isReadable ? values(w) : nil, bias: b.flatMap { $0.isReadable ? values($0) : nil }))
        }
        let knn = model.kNearestNeighbors.map { k -> NeighborsSummary in
            var allowedRange: [Int64]?, allowedSet: [Int64]?, leafSize: Int32?
            switch k.numberOfNeighbors?.allowed {
            case let .range(lo, hi)?: allowedRange = [lo, hi]
            case let .set(v)?: allowedSet = v
            case nil: break
            }
            if case let .kdTree(n)? = k.index { leafSize = n }
            let flat = k.samples.flatMap { $0 }
            return NeighborsSummary(dimension: Int(k.dimension), samples: k.samples.count, crc32: crc32(floats: flat), first: Array(flat.prefix(4)),
                                    labels: k.sampleLabelTexts, labelType: k.labels?.typeName, k: k.numberOfNeighbors?.defaultValue,
                                    allowedRange: allowedRange, allowedSet: allowedSet,
                                    weighting: k.weighting.map { $0 == .uniform ? "uniformWeighting" : "inverseDistanceWeighting" },
                                    index: k.index.map { if case .linear = $0 { return "linearIndex" } else { return "singleKdTreeIndex" } },
                                    leafSize: leafSize, defaultLabel: k.defaultLabel?.text)
        }
        // A k-NN's labels are per sample (in `kNearestNeighbors`), not a network's class labels.
        let doc = Document(specificationVersion: model.specificationVersion, isUpdatable: model.isUpdatable,
                           kind: model.spec.neuralNetwork != nil ? model.kind.rawValue : model.spec.modelType.name,
                           classLabels: knn == nil ? model.classLabels?.asStrings : nil,
                           loss: model.loss.map { $0.name }, layers: layers, kNearestNeighbors: knn)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return String(decoding: try encoder.encode(doc), as: UTF8.self)
    }

    /// Writes the sidecar to `url`.
    public static func write(for model: CoreMLModel, to url: URL) throws {
        do {
            try Data(try json(for: model).utf8).write(to: url)
        } catch let e as UpdraftError {
            throw e
        } catch {
            throw UpdraftError(.io, "cannot write \(url.path): \(error.localizedDescription)")
        }
    }

    static let table: [UInt32] = (0..<256).map { n -> UInt32 in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    /// CRC-32 (IEEE 802.3, as zlib.crc32) of the little-endian bytes of `floats`.
    public static func crc32(floats: [Float]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for f in floats {
            var bits = f.bitPattern
            for _ in 0..<4 {
                crc = table[Int((crc ^ bits) & 0xFF)] ^ (crc >> 8)
                bits >>= 8
            }
        }
        return crc ^ 0xFFFF_FFFF
    }
}
