// The differentiable problem behind each op case: its inputs (drawn away from kinks) and the
// reference forward and backward it checks.

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

        case let .convolution(spec, input, fusedReLU):
            let g = try spec.geometry(input: input)
            var inputs = [Input("x", uniform(g.inputShape.count, -1...1, &rng)),
                          Input("w", uniform(g.weightShape.count, -1...1, &rng))]
            if g.hasBias { inputs.append(Input("b", uniform(g.outChannels, -1...1, &rng))) }
            let forward: ([[Double]]) throws -> [Double] = { v in
                try Reference.convolutionForward(g, input: v[0], weights: v[1], bias: g.hasBias ? v[2] : nil,
                                                 fusedReLU: fusedReLU)
            }
            if fusedReLU {  // the ReLU must not switch within one step of any input
                let z = try Reference.convolutionForward(g, input: inputs[0].values, weights: inputs[1].values,
                                                         bias: g.hasBias ? inputs[2].values : nil)
                if let near = z.first(where: { abs($0) < 1e-4 }) {
                    throw UpdraftError(.data, "a pre-activation (\(near)) lies within 1e-4 of the ReLU kink",
                                       hint: "rename the case or change its sizes to draw other data")
                }
            }
            return Problem(inputs: inputs, forward: forward) { v, dy in
                var dz = dy  // through the fused ReLU: dy where y > 0
                if fusedReLU {
                    let y = try forward(v)
                    for i in 0..<dz.count where y[i] <= 0 { dz[i] = 0 }
                }
                let dx = try Reference.convolutionBackwardData(g, outputGradient: dz, weights: v[1])
                let (dw, db) = try Reference.convolutionBackwardWeights(g, input: v[0], outputGradient: dz)
                return g.hasBias ? [dx, dw, db] : [dx, dw]
            }

        case let .innerProduct(spec, input):
            let g = try spec.geometry(input: input)
            var inputs = [Input("x", uniform(g.batch * g.inputChannels, -1...1, &rng)),
                          Input("w", uniform(g.outputChannels * g.inputChannels, -1...1, &rng))]
            if g.hasBias { inputs.append(Input("b", uniform(g.outputChannels, -1...1, &rng))) }
            return Problem(inputs: inputs, forward: { v in
                try Reference.innerProductForward(g, input: v[0], weights: v[1], bias: g.hasBias ? v[2] : nil)
            }, backward: { v, dy in
                let dx = try Reference.innerProductBackwardData(g, outputGradient: dy, weights: v[1])
                let (dw, db) = try Reference.innerProductBackwardWeights(g, input: v[0], outputGradient: dy)
                return g.hasBias ? [dx, dw, db] : [dx, dw]
            })

        case let .activation(a, count):
            let x: [Double]
            switch a {
            case .relu, .leakyReLU: x = awayFromZero(count, &rng)
            case .sigmoid, .tanh, .linear: x = uniform(count, -2...2, &rng)
            }
            return Problem(inputs: [Input("x", x)], forward: { v in Reference.activationForward(a, input: v[0]) },
                           backward: { v, dy in
                [try Reference.activationBackward(a, input: v[0], output: Reference.activationForward(a, input: v[0]),
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

        case let .transpose(g): return try transposeProblem(g, rng: &rng)

        case let .elementwise(op, count):
            return Problem(inputs: [Input("a", uniform(count, -1...1, &rng)), Input("b", uniform(count, -1...1, &rng))],
                           forward: { v in try Reference.elementwise(op, v[0], v[1]) },
                           backward: { v, dy in
                let (da, db) = try Reference.elementwiseBackward(op, v[0], v[1], outputGradient: dy)
                return [da, db]
            })
        }
    }
}
