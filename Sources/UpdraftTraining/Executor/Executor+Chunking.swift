import UpdraftCore
import UpdraftBackends
import UpdraftModel
import UpdraftLayers
import UpdraftData

/// The first layers of a forward run a chunk of images at a time (`PrefixChunking`): each chunk's
/// inputs are views of the batch's, its layers run in a workspace sized for the chunk, and the blobs
/// later layers read are written straight into views of whole-batch buffers. Only where the blobs
/// are host memory (`CPUBuffer`): on a GPU the whole batch is what fills the device.
extension Executor {
    /// Runs the chunked start of `layers` (none when the plan, the backend or the blobs do not allow
    /// it) and returns how many layers it ran; their outputs that later layers, `keep` or the tail's
    /// backward read are then in `ws` for the whole batch.
    func forwardChunked(layers: [GraphLayer], ws: Workspace, keep: Set<String>) throws -> Int {
        guard chunksPrefix, let plan = training.prefixChunking(layers: layers, batch: ws.batch, cacheBytes: prefixChunkingLimits.cacheBytes,
                                                                largeBlobBytes: prefixChunkingLimits.largeBlobBytes) else { return 0 }
        let segment = Array(layers.prefix(plan.layerCount))
        let backend = prefixBackend
        guard segment.allSatisfy({ self.backend(for: $0) === backend }) else { return 0 }
        let produced = Set(segment.map(\.output))
        var inputs: [String] = []
        for b in segment.flatMap(\.inputs) where !produced.contains(b) && !inputs.contains(b) { inputs.append(b) }
        // Each input: a float CPU buffer holding the whole batch.
        var batchInputs: [(blob: String, buffer: CPUBuffer, perImage: Int)] = []
        for b in inputs {
            guard let v = ws.value(b), v.backend === backend, !ws.isHalf(b), let cpu = v.buffer as? CPUBuffer,
                  let shape = graph.blobShapes[b], cpu.count == shape.count * ws.batch else { return 0 }
            batchInputs.append((b, cpu, shape.count))
        }
        let rest = layers.dropFirst(plan.layerCount)
        let readLater = Set(rest.flatMap(\.inputs)).union(keep).union(training.tail.flatMap { $0.inputs + [$0.output] })
        var outputs: [(blob: String, buffer: CPUBuffer, perImage: Int)] = []
        for b in segment.map(\.output) where readLater.contains(b) && !outputs.contains(where: { $0.blob == b }) {
            guard let shape = graph.blobShapes[b], let whole = try ws.acquire(shape.count * ws.batch, on: backend) as? CPUBuffer else {
                return 0
            }
            outputs.append((b, whole, shape.count))
        }
        var start = 0
        while start < ws.batch {
            let n = min(plan.images, ws.batch - start)
            let chunk = chunkWorkspace(n)
            defer { chunk.clearValues() }
            for i in batchInputs {
                chunk.setBorrowedValue(i.blob, i.buffer.view(offset: start * i.perImage, count: n * i.perImage), on: backend)
            }
            let places = outputs.map { $0.buffer.view(offset: start * $0.perImage, count: n * $0.perImage) }
            for (o, place) in zip(outputs, places) { chunk.setDestination(o.blob, place) }
            try forwardLayers(segment, ws: chunk, keep: Set(outputs.map(\.blob)), fuse: true)
            // An output that went elsewhere (an alias of another blob): copied into its place.
            for (o, place) in zip(outputs, places) {
                guard let v = chunk.value(o.blob) else {
                    throw UpdraftError(.invalidModel, "blob '\(o.blob)' is used before it is computed")
                }
                if v.buffer !== place { try backend.copy(v.buffer, to: place) }
            }
            start += n
        }
        for o in outputs { ws.setValue(o.blob, o.buffer, on: backend) }
        for i in batchInputs where !readLater.contains(i.blob) { ws.dropValue(i.blob) }
        return plan.layerCount
    }

    /// The workspace of chunks of `images` images (kept: steady steps allocate nothing).
    private func chunkWorkspace(_ images: Int) -> Workspace {
        if let w = chunkWorkspaces[images] { return w }
        let w = Workspace(batch: images)
        chunkWorkspaces[images] = w
        return w
    }
}
