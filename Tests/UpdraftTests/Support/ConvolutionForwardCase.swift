@testable import UpdraftCore
@testable import UpdraftBackends

/// One forward convolution the CPU algorithm tests run on every backend: a layer, an input shape, an
/// optional epilogue, and optionally a slice (`offset`, `total` channels) of a wider output.
struct ConvolutionForwardCase {
    var spec: ConvolutionSpec
    var input: Shape
    var epilogue: Activation? = nil
    var offset = 0, total: Int? = nil

    /// The output after `convolutionForward` on `backend`, from seeded inputs, weights and bias; the
    /// output starts dirty (5...6), so a pass must overwrite its slice. `poison` puts a NaN in the input.
    func run(_ backend: Backend, _ g: ConvGeometry, seed: UInt64, poison: Bool = false) throws -> [Float] {
        let total = self.total ?? g.outChannels
        var x = Tensor(shape: input, uniformIn: -2...2, seed: seed)
        if poison { x.data[7] = .nan }
        let w = Tensor(shape: g.weightShape, uniformIn: -1...1, seed: seed + 1)
        let b = Tensor(shape: [g.outChannels], uniformIn: -1...1, seed: seed + 2)
        let y = try backend.makeBuffer(Tensor(shape: [g.batch, total, g.outHeight, g.outWidth], uniformIn: 5...6, seed: seed + 3))
        try backend.convolutionForward(g, input: try backend.makeBuffer(x), weights: try backend.makeBuffer(w),
                                       bias: g.hasBias ? try backend.makeBuffer(b) : nil, output: y,
                                       channelOffset: offset, outputChannels: total, epilogue: epilogue)
        return try backend.download(y)
    }
}
