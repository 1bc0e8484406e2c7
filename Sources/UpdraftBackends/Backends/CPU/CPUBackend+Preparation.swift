import Foundation
import UpdraftCore

// The CPU side of the preparation ops (Backends/DeviceOps+Preparation.swift): the oneDNN primitives
// the layers' passes will run with — the ones the override or the stored tuning chose, keyed exactly
// as the passes look them up (fused ReLU, output stride of a concat slice, layout), made on the
// backend's thread count by `OneDNNCache` — and the scratch they run in, grown and touched now so that
// its pages are not faulted in during the first step. A pass that runs on Updraft's own path makes
// nothing here. Each returns the number of primitives it made.

extension CPUBackend {
    /// Makes ready `g`'s `passes`; the forward pass writes image n's output `outputChannels * Ho * Wo`
    /// floats after image n - 1's, with `epilogue` fused.
    func prepareConvolution(_ g: ConvGeometry, passes: PreparedPasses, epilogue: Activation?, outputChannels: Int) throws -> Int {
        try validate(g)
        guard outputChannels >= g.outChannels else {
            throw UpdraftError(.invalidArgument,
                "\(name) convolution preparation: an output of \(outputChannels) channels cannot hold the layer's \(g.outChannels)")
        }
        var keys: [OneDNNConvolutionKey] = []
        if passes.contains(.forward), forwardAlgorithm(for: g) == .onednn {
            keys.append(oneDNNKey(g, .forward, relu: epilogue == .relu, outputImageStride: outputChannels * g.gemmN))
        }
        if passes.contains(.backwardData), backwardDataAlgorithm(for: g) == .onednn { keys.append(oneDNNKey(g, .backwardData)) }
        if passes.contains(.backwardWeights), backwardWeightsAlgorithm(for: g) == .onednn {
            keys.append(oneDNNKey(g, .backwardWeights))
        }
        let made = keys.map { oneDNNPrimitives.lookUp($0) }
        reserveOneDNNScratch(made.compactMap { $0.primitive?.scratchCount }.max() ?? 0)
        return made.filter { $0.isNew && $0.primitive != nil }.count
    }

    /// Makes ready a pooling's forward pass and, with `backward`, its backward pass.
    func preparePooling(_ g: PoolGeometry, backward: Bool) throws -> Int {
        guard g.batch > 0 else { return 0 }
        return prepareOps(.pooling(g), backward ? [.forward, .backward] : [.forward])
    }

    /// Makes ready an inner product's `passes`.
    func prepareInnerProduct(_ g: InnerProductGeometry, passes: PreparedPasses) throws -> Int {
        let wanted: [(PreparedPasses, CPUOpPass)] = [(.forward, .forward), (.backwardData, .backwardData),
                                                     (.backwardWeights, .backwardWeights)]
        return prepareOps(.innerProduct(g), wanted.filter { passes.contains($0.0) }.map(\.1))
    }

    /// The pooling or inner-product primitives of `shape`'s `passes` that oneDNN is asked for.
    private func prepareOps(_ shape: CPUOpShape, _ passes: [CPUOpPass]) -> Int {
        let made = passes.filter { asksOneDNN(shape, $0) }.map { oneDNNOpPrimitives.lookUp(OneDNNOpKey(shape: shape, pass: $0)) }
        reserveOneDNNScratch(made.compactMap { $0.primitive?.scratchCount }.max() ?? 0)
        return made.filter { $0.isNew && $0.primitive != nil }.count
    }

    /// Grows the first worker's workspace (where oneDNN's primitives run) to `count` floats and
    /// writes it, so the pages are there before the first step.
    private func reserveOneDNNScratch(_ count: Int) {
        guard count > 0 else { return }
        withWorkspaces { ws in
            guard ws[0].capacity < count else { return }
            ws[0].floats(count).update(repeating: 0, count: count)
        }
    }
}
