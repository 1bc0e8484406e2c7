import UpdraftCore

/// Convolution on OpenCL as implicit GEMM (Kernels/convolution.cl): the im2col matrix is read straight
/// from the NCHW tensors by the GEMM's loaders, the batch is folded into the GEMM's columns (one launch
/// per op, whatever the batch), groups run along the third grid dimension, and 1x1 stride-1 unpadded
/// convolutions build a specialised (POINTWISE) program whose loaders are plain strided GEMM reads.
///
/// - forward: y[m, (n,p)] = w[m, :] . col[:, (n,p)] + b[m], then any fused activation in the same kernel.
/// - backward data: dx[c, (n,h,w)] = the transposed convolution of dy, gathered (no scatter, no atomics).
/// - backward weights: dw = dy . col^T, split along (n,p) into slices when few output tiles would run,
///   the slices added in a fixed order; db by a two-stage tree reduction. Deterministic throughout.
extension OpenCLBackend {
    /// The slice form with the whole output (`channelOffset` 0, all channels).
    public func convolutionForward(_ g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?,
                                   output: DeviceBuffer, residual: DeviceBuffer? = nil, epilogue: Activation?) throws {
        if let residual {
            _ = try convolutionForward(g, input: input, weights: weights, bias: bias, output: output, channelOffset: 0,
                                       outputChannels: g.outChannels, epilogue: epilogue, storage: .none, residual: residual)
            return
        }
        try convolutionForward(g, input: input, weights: weights, bias: bias, output: output, channelOffset: 0,
                               outputChannels: g.outChannels, epilogue: epilogue)
    }

    /// True: the kernels can write a convolution's channels into a slice of a wider (concatenated) output.
    public var writesConvolutionSlices: Bool { true }

    /// The kernel's output pointer moves to the slice's first channel and steps images by the wider
    /// tensor's channel count.
    public func convolutionForward(_ g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?,
                                   output: DeviceBuffer, channelOffset: Int, outputChannels: Int, epilogue: Activation?) throws {
        _ = try convolutionForward(g, input: input, weights: weights, bias: bias, output: output, channelOffset: channelOffset,
                                   outputChannels: outputChannels, epilogue: epilogue, storage: .none)
    }

    /// With half storage (`storage` not `.none`): the implicit-GEMM kernel built with `-D X_HALF` /
    /// `-D Y_HALF` (Kernels/storage.h), never CLBlast; false for the direct grouped kernels (the
    /// executor converts around them). A `residual` (y's shape; whole float outputs only) is added before
    /// the activation: in the implicit-GEMM kernel's epilogue (`-D RESIDUAL`), or — grouped direct
    /// kernels — by an add and the activation after the convolution.
    public func convolutionForward(_ g: ConvGeometry, input: DeviceBuffer, weights: DeviceBuffer, bias: DeviceBuffer?,
                                   output: DeviceBuffer, channelOffset: Int, outputChannels: Int, epilogue: Activation?,
                                   storage: HalfStorage, residual: DeviceBuffer? = nil) throws -> Bool {
        let (x, w, y) = (try cl(input), try cl(weights), try cl(output))
        let b = try bias.map { try cl($0) }
        let r = try residual.map { try cl($0) }
        let plane = g.outHeight * g.outWidth
        if let r {
            guard storage == .none, channelOffset == 0, outputChannels == g.outChannels else {
                throw UpdraftError(.invalidArgument, "\(name) convolution: a fused residual needs a whole float output",
                                   hint: "run the add after the convolution for a concat's slice or half storage")
            }
            try checkConvolution(g, "convolution forward", [("residual", r, g.outputShape.count)])
            if usesGroupedDirect(g) {
                try groupedConvolutionForward(g, x: x, w: w, b: b, y: y, channelOffset: 0, outputChannels: g.outChannels)
                try elementwise(.add, output, residual!, output: output, count: g.outputShape.count)
                if let epilogue {
                    try activationForward(epilogue, ActivationGeometry(shape: g.outputShape), input: output, output: output)
                }
                return true
            }
        }
        if storage.output {
            guard channelOffset >= 0, outputChannels >= g.outChannels, channelOffset <= outputChannels - g.outChannels else {
                throw UpdraftError(.invalidArgument, "\(name): \(g.outChannels) output channels at channel \(channelOffset) do not fit in \(outputChannels)")
            }
        } else {
            try checkChannelSlice(g, output: y, channelOffset: channelOffset, outputChannels: outputChannels)
        }
        let outputCount = g.batch * outputChannels * plane
        try checkConvolution(g, "convolution forward", [
            ("input", x, HalfStorage.floats(for: g.inputShape.count, half: storage.input)), ("weights", w, g.weightShape.count),
            ("output", y, HalfStorage.floats(for: outputCount, half: storage.output))])
        guard max(g.inputShape.count, outputCount) < Int(Int32.max) else {
            throw UpdraftError(.unsupported, "\(name) convolution forward: more values than 32-bit indexing allows", hint: "use a smaller batch size")
        }
        try checkBias(g.hasBias, b, count: g.outChannels, "convolution forward")
        // Depthwise and thin grouped convolutions: the direct kernel, then the activation as its own pass
        // (over the whole output; a channel slice with an activation takes the GEMM path below).
        if usesGroupedDirect(g), epilogue == nil || (channelOffset == 0 && outputChannels == g.outChannels) {
            guard storage == .none else { return false }
            try groupedConvolutionForward(g, x: x, w: w, b: b, y: y, channelOffset: channelOffset, outputChannels: outputChannels)
            if let epilogue {
                try activationForward(epilogue, ActivationGeometry(shape: g.outputShape), input: output, output: output)
            }
            return true
        }
        if g.outputShape.count == 0 { return true }
        let shape = KernelShape(g, .convForward, fusedReLU: epilogue != nil)
        let variant = tuning.variant(for: shape)
        if storage == .none, r == nil, variant?.engine == .clblast, try clblastConvolutionForward(
            g, x: x, w: w, b: b, y: y, channelOffset: channelOffset, outputChannels: outputChannels, epilogue: epilogue,
            shape: shape) { return true }
        let (activation, table) = try activationArguments(epilogue, channels: g.outChannels, placeholder: y)
        let rows = g.gemmM, columns = g.batch * g.gemmN
        while true {
            let (tiling, _, defines) = try convolutionLaunch(g, .forward(storage: storage, residual: r != nil), variant: variant)
            guard let k = try gemmKernel("convolution.cl", "conv_forward", tiling: tiling, defines: defines) else { continue }
            try enqueue(k, [.buffer(x), .int(0), .buffer(w), .buffer(b ?? w), .int(b == nil ? 0 : 1),
                            .buffer(y), .int(channelOffset * plane), .int(outputChannels), .int(g.batch)] + activation + convArguments(g)
                            + (r.map { [.buffer($0)] } ?? []),
                        global: convGrid(tiling, rows: rows, columns: columns, slabs: g.groups),
                        local: tiling.workGroup + [1], defines: defines, holding: table)
            return true
        }
    }

    /// The transposed convolution of dy as an implicit GEMM that gathers (no scatter, no atomics); CLBlast for pointwise convolutions where tuning chose it; direct kernels for grouped convolutions with few channels per group.
    public func convolutionBackwardData(_ g: ConvGeometry, outputGradient: DeviceBuffer, weights: DeviceBuffer,
                                        inputGradient: DeviceBuffer) throws {
        let (dy, w, dx) = (try cl(outputGradient), try cl(weights), try cl(inputGradient))
        try checkConvolution(g, "convolution backward data", [
            ("output gradient", dy, g.outputShape.count), ("weights", w, g.weightShape.count),
            ("input gradient", dx, g.inputShape.count)])
        if g.inputShape.count == 0 { return }
        if usesGroupedDirect(g) { return try groupedConvolutionBackwardData(g, dy: dy, w: w, dx: dx) }
        let shape = KernelShape(g, .convBackwardData)
        let variant = tuning.variant(for: shape)
        if variant?.engine == .clblast, try clblastConvolutionBackwardData(g, dy: dy, w: w, dx: dx, shape: shape) { return }
        let rows = g.inChannels / g.groups, columns = g.batch * g.inHeight * g.inWidth
        while true {
            let (tiling, _, defines) = try convolutionLaunch(g, .backwardData, variant: variant)
            guard let k = try gemmKernel("convolution.cl", "conv_backward_data", tiling: tiling, defines: defines) else { continue }
            try enqueue(k, [.buffer(dy), .int(0), .buffer(w), .buffer(dx), .int(0), .int(g.batch)] + convArguments(g),
                        global: convGrid(tiling, rows: rows, columns: columns, slabs: g.groups),
                        local: tiling.workGroup + [1], defines: defines)
            return
        }
    }

    /// dw = dy . col^T, split along (image, position) into slices added in a fixed order when few tiles would run (or one CLBlast GEMM per image where tuning chose it); db by a two-stage tree reduction. Deterministic.
    public func convolutionBackwardWeights(_ g: ConvGeometry, input: DeviceBuffer, outputGradient: DeviceBuffer,
                                           weightGradient: DeviceBuffer, biasGradient: DeviceBuffer?) throws {
        let (x, dy, dw) = (try cl(input), try cl(outputGradient), try cl(weightGradient))
        let db = try biasGradient.map { try cl($0) }
        try checkConvolution(g, "convolution backward weights", [
            ("input", x, g.inputShape.count), ("output gradient", dy, g.outputShape.count),
            ("weight gradient", dw, g.weightShape.count)])
        try checkBias(g.hasBias, db, count: g.outChannels, "convolution backward weights")
        // The bias reduction goes first: it and the split-K slices share the scratch buffer, in queue order.
        if let db { try self.biasGradient(dy, images: g.batch, channels: g.outChannels, spatial: g.gemmN, into: db) }
        let weightCount = g.weightShape.count
        if weightCount == 0 { return }
        if usesGroupedDirect(g) { return try groupedConvolutionBackwardWeights(g, x: x, dy: dy, dw: dw) }
        let rows = g.gemmM, columns = g.gemmK
        let shape = KernelShape(g, .convBackwardWeights)
        let variant = tuning.variant(for: shape)
        if variant?.engine == .clblast, try clblastConvolutionBackwardWeights(g, x: x, dy: dy, dw: dw, shape: shape,
                                                                              perImage: variant?.splits == 1) { return }
        while true {
            let (tiling, split, defines) = try convolutionLaunch(g, .backwardWeights, variant: variant)
            guard let k = try gemmKernel("convolution.cl", "conv_backward_weights", tiling: tiling, defines: defines) else { continue }
            let out = split.splits > 1 ? try gemmWorkspace.scratch(count: split.splits * weightCount, context: context) : dw
            try enqueue(k, [.buffer(x), .int(0), .buffer(dy), .int(0), .buffer(out), .int(0),
                            .int(split.splits), .int(split.chunk), .int(g.batch)] + convArguments(g),
                        global: convGrid(tiling, rows: rows, columns: columns, slabs: g.groups * split.splits),
                        local: tiling.workGroup + [1], defines: defines)
            if split.splits > 1 {
                try sumSlabs(out, offset: 0, rows: 1, columns: weightCount, slabs: split.splits,
                             into: dw, offset: 0, ld: weightCount)
            }
            return
        }
    }

    // MARK: Helpers

    /// The kernel's geometry arguments (CONV_ARGS in convolution.cl), in order.
    private func convArguments(_ g: ConvGeometry) -> [KernelArgument] {
        [g.inChannels, g.inHeight, g.inWidth, g.outChannels, g.outHeight, g.outWidth, g.kernelH, g.kernelW,
         g.strideH, g.strideW, g.dilationH, g.dilationW, g.padTop, g.padLeft, g.groups].map { .int($0) }
    }

    /// One pass of the implicit-GEMM convolution kernels (convolution.cl's CONV_MODE 0, 1, 2).
    enum ConvolutionPass {
        case forward(storage: HalfStorage, residual: Bool), backwardData, backwardWeights
    }

    /// The tiling, split of the reduction (weight gradients only; else one slice) and program
    /// defines `pass` of `g` launches with: what the launch builds and what preparation builds ahead
    /// (`OpenCLBackend+Preparation.swift`). The rows, columns and depth are the pass's GEMM's.
    func convolutionLaunch(_ g: ConvGeometry, _ pass: ConvolutionPass, variant: KernelVariant?) throws
        -> (tiling: GemmTiling, split: (splits: Int, chunk: Int), defines: [String: String]) {
        let mode: Int, rows: Int, columns: Int, depth: Int
        switch pass {
        case .forward: (mode, rows, columns, depth) = (0, g.gemmM, g.batch * g.gemmN, g.gemmK)
        case .backwardData: (mode, rows, columns, depth) = (1, g.inChannels / g.groups, g.batch * g.inHeight * g.inWidth,
                                                            g.gemmM * g.kernelH * g.kernelW)
        case .backwardWeights: (mode, rows, columns, depth) = (2, g.gemmM, g.gemmK, g.batch * g.gemmN)
        }
        let splittable = mode == 2 && depth > 1024
        let tiling = try gemmTiling(rows: rows, columns: columns, slabs: g.groups, splittable: splittable, variant: variant)
        var split = (splits: 1, chunk: depth)
        if mode == 2 {
            let tiles = ceilDiv(rows, tiling.tileM) * ceilDiv(columns, tiling.tileN) * g.groups
            split = splitK(tiles: tiles, k: depth, tileK: tiling.tileK, slabFloats: g.weightShape.count, fixed: variant?.splits)
        }
        let exact = rows % tiling.tileM == 0 && columns % tiling.tileN == 0 && depth % tiling.tileK == 0
            && (mode != 2 || split.chunk % tiling.tileK == 0)
        var defines = convDefines(g, mode: mode, tiling: tiling, exact: exact)
        if case let .forward(storage, residual) = pass {
            if storage.input { defines["X_HALF"] = "1" }
            if storage.output { defines["Y_HALF"] = "1" }
            if residual { defines["RESIDUAL"] = "1" }
        }
        return (tiling, split, defines)
    }

    private func convDefines(_ g: ConvGeometry, mode: Int, tiling: GemmTiling, exact: Bool) -> [String: String] {
        let pointwise = g.kernelH == 1 && g.kernelW == 1 && g.strideH == 1 && g.strideW == 1
            && g.padTop == 0 && g.padLeft == 0 && g.padBottom == 0 && g.padRight == 0
        var d = tiling.defines
        d["CONV_MODE"] = "\(mode)"
        d["POINTWISE"] = pointwise ? "1" : "0"
        d["GEMM_EXACT"] = exact ? "1" : "0"
        return d
    }

    private func convGrid(_ t: GemmTiling, rows: Int, columns: Int, slabs: Int) -> [Int] {
        [ceilDiv(columns, t.tileN) * t.workGroup[0], ceilDiv(rows, t.tileM) * t.workGroup[1], slabs]
    }

    /// Checks a (possibly hand-built) geometry and that each buffer holds what the op touches.
    private func checkConvolution(_ g: ConvGeometry, _ op: String, _ buffers: [(String, OpenCLBuffer, Int)]) throws {
        let positive = [g.inChannels, g.outChannels, g.kernelH, g.kernelW, g.strideH, g.strideW,
                        g.dilationH, g.dilationW, g.groups]
        let sizes = [g.batch, g.inHeight, g.inWidth, g.outHeight, g.outWidth, g.padTop, g.padLeft, g.padBottom, g.padRight]
        guard positive.allSatisfy({ $0 >= 1 }), sizes.allSatisfy({ $0 >= 0 }),
              g.inChannels % g.groups == 0, g.outChannels % g.groups == 0 else {
            throw UpdraftError(.invalidArgument, "\(name) \(op): invalid geometry \(g)",
                               hint: "build geometries with ConvolutionSpec.geometry(input:)")
        }
        for (what, buffer, need) in buffers {
            guard buffer.count >= need else {
                throw UpdraftError(.invalidArgument, "\(name) \(op): \(what) holds \(buffer.count) values, the op needs \(need)",
                                   hint: "allocate buffers from the geometry's shapes")
            }
            guard need < Int(Int32.max) else {
                throw UpdraftError(.unsupported, "\(name) \(op): \(what) has \(need) values, more than 32-bit indexing allows",
                                   hint: "use a smaller batch size")
            }
        }
    }

    /// A bias buffer must come exactly when the geometry has a bias, and hold one value per channel.
    func checkBias(_ hasBias: Bool, _ bias: OpenCLBuffer?, count: Int, _ op: String) throws {
        if hasBias != (bias != nil) {
            throw UpdraftError(.invalidArgument,
                hasBias ? "\(name) \(op): the geometry has a bias but no bias buffer was passed"
                        : "\(name) \(op): the geometry has no bias but a bias buffer was passed")
        }
        if let bias, bias.count < count {
            throw UpdraftError(.invalidArgument, "\(name) \(op): bias holds \(bias.count) values, needs \(count)")
        }
    }
}

@inline(__always) private func ceilDiv(_ a: Int, _ b: Int) -> Int { (a + b - 1) / b }

extension OpenCLBackend {
    /// What runs a convolution pass here, as a profile names it: the grouped direct kernel, or per
    /// GEMM-shaped pass the engine `updraft tune` stored for its shape (the in-house kernel's table
    /// tiling when nothing is stored).
    public func convolutionEngine(_ g: ConvGeometry, backward: Bool, inputGradient: Bool) -> String {
        if usesGroupedDirect(g) { return "grouped direct kernel" }
        func name(_ kind: KernelShape.Kind) -> String { tuning.variant(for: KernelShape(g, kind))?.description ?? "in-house table tiling" }
        guard backward else { return name(.convForward) }
        return "weights " + name(.convBackwardWeights) + (inputGradient ? ", input " + name(.convBackwardData) : "")
    }
}
