// The differentiable problem behind each op case: its inputs (drawn away from kinks) and the
// reference forward and backward it checks.
import UpdraftCore

extension GradientCheck {
    /// The problem for a case, or nil for ops without gradients handled elsewhere (memory, optimizers).
    static func problem(for c: OpCase, rng: inout SplitMix64) throws -> Problem? {
        switch c.kind {
        case .memory, .sgd, .adam:
            return nil

        case let .spatial(op, input):
            return try spatialProblem(op, input: input, rng: &rng)
        case let .broadcast(g):
            return broadcastProblem(g, rng: &rng)
        case let .reduction(g):
            return try reductionProblem(g, rng: &rng)

        case let .convolution(spec, input, epilogue):
            let g = try spec.geometry(input: input)
            var inputs = [Input("x", uniform(g.inputShape.count, -1...1, &rng)),
                          Input("w", uniform(g.weightShape.count, -1...1, &rng))]
            if g.hasBias { inputs.append(Input("b", uniform(g.outChannels, -1...1, &rng))) }
            let pre: ([[Double]]) throws -> [Double] = { v in
                try Reference.convolutionForward(g, input: v[0], weights: v[1], bias: g.hasBias ? v[2] : nil)
            }
            let act = ActivationGeometry(shape: g.outputShape)
            try requireAwayFromKinks(epilogue, try pre(inputs.map(\.values)))
            return Problem(inputs: inputs, forward: { v in try applyEpilogue(epilogue, act, try pre(v)) }) { v, dy in
                let dz = try epilogueGradient(epilogue, act, try pre(v), dy)
                let dx = try Reference.convolutionBackwardData(g, outputGradient: dz, weights: v[1])
                let (dw, db) = try Reference.convolutionBackwardWeights(g, input: v[0], outputGradient: dz)
                return g.hasBias ? [dx, dw, db] : [dx, dw]
            }

        case let .innerProduct(spec, input, epilogue):
            let g = try spec.geometry(input: input)
            var inputs = [Input("x", uniform(g.batch * g.inputChannels, -1...1, &rng)),
                          Input("w", uniform(g.outputChannels * g.inputChannels, -1...1, &rng))]
            if g.hasBias { inputs.append(Input("b", uniform(g.outputChannels, -1...1, &rng))) }
            let pre: ([[Double]]) throws -> [Double] = { v in
                try Reference.innerProductForward(g, input: v[0], weights: v[1], bias: g.hasBias ? v[2] : nil)
            }
            let act = ActivationGeometry(batch: g.batch, channels: g.outputChannels, spatial: 1)
            try requireAwayFromKinks(epilogue, try pre(inputs.map(\.values)))
            return Problem(inputs: inputs, forward: { v in try applyEpilogue(epilogue, act, try pre(v)) }, backward: { v, dy in
                let dz = try epilogueGradient(epilogue, act, try pre(v), dy)
                let dx = try Reference.innerProductBackwardData(g, outputGradient: dz, weights: v[1])
                let (dw, db) = try Reference.innerProductBackwardWeights(g, input: v[0], outputGradient: dz)
                return g.hasBias ? [dx, dw, db] : [dx, dw]
            })

        case let .activation(a, geometry):
            let x = awayFromKinks(a, count: geometry.count, &rng)
            return Problem(inputs: [Input("x", x)], forward: { v in try Reference.activationForward(a, geometry, input: v[0]) },
                           backward: { v, dy in
                [try Reference.activationBackward(a, geometry, input: v[0], output: Reference.activationForward(a, geometry, input: v[0]),
                                                  outputGradient: dy)]
            })

        case let .pooling(spec, input):
            let g = try spec.geometry(input: input)
            let x = g.kind == .max ? distinct(g.inputShape.count, &rng) : uniform(g.inputShape.count, -1...1, &rng)
            return Problem(inputs: [Input("x", x)], forward: { v in try Reference.poolingForward(g, input: v[0]) },
                           backward: { v, dy in [try Reference.poolingBackward(g, input: v[0], outputGradient: dy)] })

        case let .concat(channels, batch, spatial):
            let inputs = channels.enumerated().map { i, c in Input("x\(i)", uniform(batch * c * spatial, -1...1, &rng)) }
            return Problem(inputs: inputs, forward: { v in
                try Reference.concatForward(v, channels: channels, batch: batch, spatial: spatial)
            }, backward: { _, dy in
                try Reference.concatBackward(dy, channels: channels, batch: batch, spatial: spatial)
            })

        case let .softmax(g):
            return Problem(inputs: [Input("x", uniform(g.count, -2...2, &rng))],
                           forward: { v in try Reference.softmaxForward(g, input: v[0]) },
                           backward: { v, dy in
                [try Reference.softmaxBackward(g, output: Reference.softmaxForward(g, input: v[0]), outputGradient: dy)]
            })

        case let .softmaxCrossEntropy(batch, classes):
            let g = SoftmaxGeometry(batch: batch, channels: classes)
            let labels = (0..<batch).map { _ in Double(rng.next() % UInt64(max(classes, 1))) }
            return Problem(inputs: [Input("z", uniform(batch * classes, -2...2, &rng)),
                                    Input("labels", labels, differentiable: false)],
                           forward: { v in [try Reference.softmaxCrossEntropy(g, logits: v[0], labels: v[1]).loss] },
                           backward: { v, dy in
                let dz = try Reference.softmaxCrossEntropy(g, logits: v[0], labels: v[1]).logitsGradient
                return [dz.map { $0 * dy[0] }, nil]
            })

        case let .meanSquaredError(count):
            return Problem(inputs: [Input("x", uniform(count, -1...1, &rng)),
                                    Input("target", uniform(count, -1...1, &rng), differentiable: false)],
                           forward: { v in [try Reference.meanSquaredError(input: v[0], target: v[1]).loss] },
                           backward: { v, dy in
                [try Reference.meanSquaredError(input: v[0], target: v[1]).inputGradient.map { $0 * dy[0] }, nil]
            })

        case let .channelAffine(shape):
            return Problem(inputs: [Input("x", uniform(shape.count, -1...1, &rng)),
                                    Input("scale", uniform(shape.c, 0.5...1.5, &rng), differentiable: false),
                                    Input("shift", uniform(shape.c, -1...1, &rng), differentiable: false)],
                           forward: { v in try Reference.channelAffine(shape, input: v[0], scale: v[1], shift: v[2]) },
                           backward: { v, dy in
                [try Reference.channelAffineBackward(shape, outputGradient: dy, scale: v[1]), nil, nil]
            })

        case let .layout(op, batch): return try layoutProblem(op, batch: batch, rng: &rng)

        case let .elementwise(op, count):
            return Problem(inputs: [Input("a", uniform(count, -1...1, &rng)), Input("b", uniform(count, -1...1, &rng))],
                           forward: { v in try Reference.elementwise(op, v[0], v[1]) },
                           backward: { v, dy in
                let (da, db) = try Reference.elementwiseBackward(op, v[0], v[1], outputGradient: dy)
                return [da, db]
            })
        }
    }

    /// y = f(z), or z without an epilogue.
    static func applyEpilogue(_ a: Activation?, _ g: ActivationGeometry, _ z: [Double]) throws -> [Double] {
        guard let a else { return z }
        return try Reference.activationForward(a, g, input: z)
    }

    /// dL/dz through the epilogue y = f(z).
    static func epilogueGradient(_ a: Activation?, _ g: ActivationGeometry, _ z: [Double], _ dy: [Double]) throws -> [Double] {
        guard let a else { return dy }
        return try Reference.activationBackward(a, g, input: z, output: try Reference.activationForward(a, g, input: z), outputGradient: dy)
    }

    /// Throws when a pre-activation lies within 1e-4 of a kink of the epilogue (the finite difference
    /// would straddle it): the case needs other sizes or a different name to draw other data.
    static func requireAwayFromKinks(_ a: Activation?, _ z: [Double]) throws {
        guard let a else { return }
        for k in a.kinks {
            if let near = z.first(where: { abs($0 - k) < 1e-4 }) {
                throw UpdraftError(.data, "a pre-activation (\(near)) lies within 1e-4 of the \(a) kink at \(k)",
                                   hint: "rename the case or change its sizes to draw other data")
            }
        }
    }

    /// Inputs in the function's verification range, at least 0.05 from every kink (redrawn when closer).
    static func awayFromKinks(_ a: Activation, count: Int, _ rng: inout SplitMix64) -> [Double] {
        let range = a.verificationRange(), kinks = a.kinks
        return (0..<count).map { _ in
            var v = 0.0
            repeat { v = range.lowerBound + (range.upperBound - range.lowerBound) * rng.nextDouble() }
            while kinks.contains(where: { abs(v - $0) < 0.05 })
            return v
        }
    }
}
