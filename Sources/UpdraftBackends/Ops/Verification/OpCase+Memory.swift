// The ops that only move values, in the verification tools: a backend's memory primitives (upload,
// download, fill, copy, accumulate) and channel concatenation; both compare exactly.
import UpdraftCore

/// upload, download, fill, copy and accumulate on `count` elements (nothing to difference).
public struct MemoryCase: VerifiedOp {
    public var count: Int

    public var opName: String { "memory" }
    public var summary: String { "×\(count)" }

    public func gradientProblem(rng: inout SplitMix64) throws -> GradientCheck.Problem? { nil }

    public func compare(in s: inout ComparisonSession) throws {
        let backend = s.backend
        let a = s.values(count), b = s.values(count), tail: [Float] = [1, 2, 3]
        let buffer = try s.upload(a)
        s.record("upload/download", try s.download(buffer), asDouble(a), tolerance: .exact)
        try backend.fill(buffer, with: 0.25)
        s.record("fill", try s.download(buffer), [Double](repeating: 0.25, count: count), tolerance: .exact)
        // copy and accumulate touch only the first source.count elements of a larger destination
        let source = try s.upload(a), destination = try s.upload(b + tail)
        try backend.copy(source, to: destination)
        s.record("copy", try s.download(destination), asDouble(a + tail), tolerance: .exact)
        let sum = try s.upload(b + tail)
        try backend.accumulate(source, into: sum)
        s.record("accumulate", try s.download(sum), zip(a, b).map { Double($0) + Double($1) } + asDouble(tail))
    }
}

/// Inputs [batch, channels[i], spatial] joined along channels.
public struct ConcatCase: VerifiedOp {
    public var channels: [Int]
    public var batch: Int
    public var spatial: Int

    public var opName: String { "concat" }
    public var summary: String { "n\(batch) channels \(channels.map(String.init).joined(separator: "+")) spatial \(spatial)" }

    public func gradientProblem(rng: inout SplitMix64) throws -> GradientCheck.Problem? {
        let (channels, batch, spatial) = (self.channels, self.batch, self.spatial)
        let inputs = channels.enumerated().map { i, c in
            GradientCheck.Input("x\(i)", GradientCheck.uniform(batch * c * spatial, -1...1, &rng))
        }
        return GradientCheck.Problem(inputs: inputs, forward: { v in
            try Reference.concatForward(v, channels: channels, batch: batch, spatial: spatial)
        }, backward: { _, dy in
            try Reference.concatBackward(dy, channels: channels, batch: batch, spatial: spatial)
        })
    }

    public func compare(in s: inout ComparisonSession) throws {
        var xs: [[Float]] = []
        for c in channels { xs.append(s.values(batch * c * spatial)) }
        let total = batch * channels.reduce(0, +) * spatial
        let y = try s.output(total)
        try s.backend.concatForward(try xs.map(s.upload), channels: channels, batch: batch, spatial: spatial, output: y)
        try s.record("y", y, Reference.concatForward(xs.map(asDouble), channels: channels, batch: batch, spatial: spatial),
                     tolerance: .exact)

        let dy = s.values(total)
        let dxs = try channels.map { try s.output(batch * $0 * spatial) }
        try s.backend.concatBackward(try s.upload(dy), channels: channels, batch: batch, spatial: spatial, inputGradients: dxs)
        let reference = try Reference.concatBackward(asDouble(dy), channels: channels, batch: batch, spatial: spatial)
        s.record("dx", try dxs.flatMap(s.download), reference.flatMap { $0 }, tolerance: .exact)
    }
}

extension VerifiedOp where Self == MemoryCase {
    public static func memory(count: Int) -> MemoryCase { MemoryCase(count: count) }
}

extension VerifiedOp where Self == ConcatCase {
    public static func concat(channels: [Int], batch: Int, spatial: Int) -> ConcatCase {
        ConcatCase(channels: channels, batch: batch, spatial: spatial)
    }
}
