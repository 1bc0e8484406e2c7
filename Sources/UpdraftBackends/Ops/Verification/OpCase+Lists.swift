// The shared case lists. `.gradientCheck` holds small shapes for finite differences (every element is
// differenced, so cost grows with size squared); `.quick` and `.full` hold the sizes fast paths get
// wrong: 1, 7, 31, 32, 33, 63, 65 for channels and spatial sizes, strides, padding, groups, batch 1
// and 3. The lists pick combinations rather than a cross product, so `.full` stays a few million
// multiply-adds per op direction (about 1.5 s for the reference in a debug build).
import UpdraftCore

extension Array where Element == OpCase {
    /// Small awkward shapes for `GradientCheck`: odd sizes, batch 1 and 3, stride 2, dilation 2,
    /// asymmetric and same padding (both modes), groups, ceil-mode windows over the edge, pooling with
    /// and without padding in the average, global pooling, every activation, a 3-way concat, softmax
    /// over channels with spatial > 1, both losses, and the optimizers' closed forms.
    public static var gradientCheck: [OpCase] {
        let sgdMomentum = SGDHyperparameters(learningRate: 0.1, momentum: 0.9)
        let sgdDecay = SGDHyperparameters(learningRate: 0.1, momentum: 0, weightDecay: 0.01)
        let sgdBoth = SGDHyperparameters(learningRate: 0.05, momentum: 0.9, weightDecay: 0.001)
        return [
            .convolution([3, 2, 5, 4], outputChannels: 3, kernel: (3, 3), padding: .valid(top: 1, bottom: 1, left: 1, right: 1)),
            .convolution([1, 3, 7, 6], outputChannels: 2, kernel: (3, 3), stride: (2, 2),
                         padding: .valid(top: 0, bottom: 1, left: 2, right: 1)),
            .convolution([1, 2, 7, 7], outputChannels: 2, kernel: (3, 3), dilation: (2, 2)),
            .convolution([1, 2, 5, 7], outputChannels: 2, kernel: (2, 4), stride: (2, 1), padding: .same(.bottomRightHeavy)),
            .convolution([3, 2, 5, 6], outputChannels: 2, kernel: (4, 3), stride: (1, 2), padding: .same(.topLeftHeavy)),
            .convolution([1, 2, 9, 8], outputChannels: 2, kernel: (3, 3), stride: (2, 2), dilation: (2, 2),
                         padding: .same(.bottomRightHeavy)),
            .convolution([3, 4, 4, 5], outputChannels: 6, kernel: (3, 3), groups: 2,
                         padding: .valid(top: 1, bottom: 1, left: 1, right: 1)),
            .convolution([1, 3, 5, 5], outputChannels: 3, kernel: (3, 3), stride: (2, 2), groups: 3, padding: .same(.bottomRightHeavy)),
            .convolution([3, 2, 5, 5], outputChannels: 3, kernel: (3, 3), padding: .valid(top: 1, bottom: 1, left: 1, right: 1),
                         bias: false, fusedReLU: true),
            .convolution([3, 3, 2, 3], outputChannels: 4, kernel: (1, 1)),

            .innerProduct([3, 6], outputChannels: 4),
            .innerProduct([1, 2, 2, 2], outputChannels: 3, bias: false),
            .innerProduct([3, 1], outputChannels: 1),

            OpCase(.activation(.relu, count: 15)),
            OpCase(.activation(.leakyReLU(alpha: 0.1), count: 15)),
            OpCase(.activation(.sigmoid, count: 7)),
            OpCase(.activation(.tanh, count: 7)),
            OpCase(.activation(.linear(alpha: 0.5, beta: -0.3), count: 7)),
        ] + [OpCase].activationGradientChecks + [

            .pooling(.max, [3, 2, 5, 5], kernel: (2, 2), stride: (2, 2)),
            .pooling(.max, [1, 2, 6, 6], kernel: (3, 3), stride: (2, 2), padding: .includeLastPixel(height: 0, width: 0)),
            .pooling(.max, [1, 2, 5, 7], kernel: (3, 3), stride: (2, 2), padding: .includeLastPixel(height: 1, width: 1)),
            .pooling(.max, [1, 2, 6, 7], kernel: (3, 3), stride: (2, 2), padding: .valid(top: 1, bottom: 0, left: 2, right: 1)),
            .pooling(.max, [1, 1, 5, 5], kernel: (2, 2), stride: (2, 2), padding: .same(.topLeftHeavy)),
            .pooling(.average, [3, 2, 6, 5], kernel: (3, 3), stride: (2, 2), padding: .includeLastPixel(height: 0, width: 0)),
            .pooling(.average, [1, 2, 5, 7], kernel: (3, 3), stride: (2, 2), padding: .includeLastPixel(height: 1, width: 1),
                     excludePadding: true),
            .pooling(.average, [1, 2, 5, 7], kernel: (3, 3), stride: (2, 2), padding: .includeLastPixel(height: 1, width: 1),
                     excludePadding: false),
            .pooling(.average, [1, 2, 5, 5], kernel: (3, 3), stride: (1, 1), padding: .same(.bottomRightHeavy)),
            .pooling(.average, [1, 2, 5, 5], kernel: (2, 2), stride: (1, 1), padding: .same(.topLeftHeavy), excludePadding: false),
            .pooling(.average, [1, 2, 4, 6], kernel: (2, 3), stride: (1, 2), padding: .valid(top: 1, bottom: 0, left: 0, right: 2),
                     excludePadding: false),
            .globalPooling(.average, [3, 3, 4, 5]),
            .globalPooling(.max, [1, 2, 3, 5]),

            OpCase(.concat(channels: [1, 2, 3], batch: 3, spatial: 5)),
            OpCase(.concat(channels: [2, 1, 1], batch: 1, spatial: 1)),

            OpCase(.softmax(SoftmaxGeometry(batch: 3, channels: 4, spatial: 5))),
            OpCase(.softmax(SoftmaxGeometry(batch: 1, channels: 6, spatial: 1))),
            OpCase(.softmaxCrossEntropy(batch: 3, classes: 5)),
            OpCase(.softmaxCrossEntropy(batch: 1, classes: 7)),
            OpCase(.meanSquaredError(count: 7)),
            OpCase(.meanSquaredError(count: 1)),

            OpCase(.channelAffine([3, 4, 2, 3])),
            OpCase(.elementwise(.add, count: 7)),
            OpCase(.elementwise(.multiply, count: 7)),

            OpCase(.sgd(sgdMomentum, count: 5, steps: 4)),
            OpCase(.sgd(sgdDecay, count: 5, steps: 3)),
            OpCase(.sgd(sgdBoth, count: 5, steps: 3)),
            OpCase(.adam(AdamHyperparameters(learningRate: 0.01), count: 5, steps: 4)),
            OpCase(.adam(AdamHyperparameters(learningRate: 0.01, weightDecay: 0.1), count: 5, steps: 1)),
        ] + [OpCase].spatialGradientCheck + [OpCase].broadcastGradientCheck + OpCase.layoutGradientCheck
            + [OpCase].layerNormalizationGradientCheck
    }

    /// The first `.gradientCheck` case of every op: a fast smoke test.
    public static var gradientCheckQuick: [OpCase] { [OpCase].gradientCheck.firstOfEachOp() }

    /// A handful of small cases, one or two per op, for smoke tests of a backend.
    public static var quick: [OpCase] {
        [
            OpCase(.memory(count: 33)),
            .convolution([3, 3, 7, 7], outputChannels: 4, kernel: (3, 3), stride: (2, 2),
                         padding: .valid(top: 1, bottom: 1, left: 1, right: 1)),
            .convolution([1, 4, 6, 5], outputChannels: 4, kernel: (3, 3), groups: 2, padding: .same(.bottomRightHeavy),
                         bias: false, fusedReLU: true),
            .innerProduct([3, 7], outputChannels: 5),
            OpCase(.activation(.relu, count: 33)),
            OpCase(.activation(.sigmoid, count: 33)),
            OpCase(.activation(.clip(min: 0, max: 6), count: 33)),
            OpCase(.activation(.prelu(alpha: [0.1, -0.2, 0.3]), ActivationGeometry(batch: 2, channels: 3, spatial: 5))),
            .convolution([2, 3, 5, 7], outputChannels: 5, kernel: (3, 3), padding: .same(.bottomRightHeavy),
                         epilogue: .clip(min: -0.25, max: 0.5)),
            .innerProduct([3, 7], outputChannels: 5, epilogue: .sigmoidHard(alpha: 0.2, beta: 0.5)),
            .pooling(.max, [3, 2, 7, 7], kernel: (3, 3), stride: (2, 2), padding: .includeLastPixel(height: 0, width: 0)),
            .pooling(.average, [1, 3, 6, 6], kernel: (3, 3), stride: (2, 2),
                     padding: .valid(top: 1, bottom: 1, left: 1, right: 1), excludePadding: false),
            OpCase(.concat(channels: [1, 2, 3], batch: 3, spatial: 7)),
            OpCase(.softmax(SoftmaxGeometry(batch: 3, channels: 7, spatial: 5))),
            OpCase(.softmaxCrossEntropy(batch: 3, classes: 7)),
            OpCase(.meanSquaredError(count: 7)),
            OpCase(.channelAffine([3, 4, 3, 3])),
            OpCase(.elementwise(.add, count: 7)),
            OpCase(.elementwise(.multiply, count: 7)),
            OpCase(.sgd(SGDHyperparameters(learningRate: 0.01, momentum: 0.9, weightDecay: 1e-3), count: 33, steps: 3)),
            OpCase(.adam(AdamHyperparameters(learningRate: 0.01), count: 33, steps: 3)),
        ] + [OpCase].spatialQuick + [OpCase].broadcastQuick + OpCase.layoutQuick + [OpCase].layerNormalizationQuick
    }

    /// Awkward sizes for every op: what a fast path must get right before it is timed.
    public static var full: [OpCase] {
        [
            OpCase(.memory(count: 1)),
            OpCase(.memory(count: 65 * 63)),

            // convolution: pointwise, stride 1 on a large odd plane, stride 2 asymmetric, dilation +
            // same-topleft, depthwise, grouped + fused ReLU, 7x7 stride 2, spatial 1x1, one output
            // channel, same + fused ReLU. Sizes keep each case under a million multiply-adds.
            .convolution([3, 33, 7, 7], outputChannels: 65, kernel: (1, 1)),
            .convolution([1, 1, 63, 65], outputChannels: 7, kernel: (3, 3), padding: .same(.bottomRightHeavy)),
            .convolution([1, 31, 15, 17], outputChannels: 33, kernel: (3, 3), stride: (2, 2),
                         padding: .valid(top: 1, bottom: 0, left: 1, right: 0)),
            .convolution([1, 3, 63, 65], outputChannels: 7, kernel: (3, 3), dilation: (2, 2), padding: .same(.topLeftHeavy)),
            .convolution([1, 63, 33, 31], outputChannels: 63, kernel: (3, 3), stride: (2, 2), groups: 63,
                         padding: .same(.bottomRightHeavy)),
            .convolution([3, 32, 7, 7], outputChannels: 32, kernel: (3, 3), groups: 4,
                         padding: .valid(top: 1, bottom: 1, left: 1, right: 1), bias: false, fusedReLU: true),
            .convolution([3, 1, 33, 31], outputChannels: 7, kernel: (7, 7), stride: (2, 2),
                         padding: .valid(top: 3, bottom: 2, left: 1, right: 3)),
            .convolution([3, 65, 1, 1], outputChannels: 63, kernel: (1, 1)),
            .convolution([1, 7, 65, 63], outputChannels: 1, kernel: (3, 3)),
            .convolution([1, 7, 32, 33], outputChannels: 7, kernel: (3, 3), padding: .same(.bottomRightHeavy), fusedReLU: true),

            .innerProduct([3, 65], outputChannels: 33),
            .innerProduct([1, 7, 3, 3], outputChannels: 63),
            .innerProduct([3, 1], outputChannels: 1, bias: false),
            .innerProduct([3, 1000], outputChannels: 10),

            OpCase(.activation(.relu, count: 65 * 63)),
            OpCase(.activation(.relu, count: 1)),
            OpCase(.activation(.relu, count: 65), values: .coarse),  // exact zeros: dx = 0 at x = 0
            OpCase(.activation(.leakyReLU(alpha: 0.01), count: 33)),
            OpCase(.activation(.leakyReLU(alpha: 0.2), count: 65), values: .coarse),
            OpCase(.activation(.sigmoid, count: 65 * 63)),
            OpCase(.activation(.tanh, count: 7)),
            OpCase(.activation(.linear(alpha: 2, beta: -1), count: 31)),
        ] + [OpCase].activationComparisons + [

            .pooling(.max, [3, 7, 65, 65], kernel: (3, 3), stride: (2, 2), padding: .includeLastPixel(height: 0, width: 0)),
            .pooling(.max, [1, 7, 33, 33], kernel: (3, 3), stride: (2, 2), padding: .includeLastPixel(height: 0, width: 0),
                     values: .coarse),  // ties: the first maximum wins
            .pooling(.max, [1, 32, 33, 33], kernel: (2, 2), stride: (2, 2)),
            .pooling(.max, [1, 33, 7, 7], kernel: (3, 3), stride: (1, 1), padding: .valid(top: 1, bottom: 1, left: 1, right: 1)),
            .pooling(.average, [1, 31, 32, 32], kernel: (3, 3), stride: (2, 2), padding: .includeLastPixel(height: 1, width: 1),
                     excludePadding: false),
            .pooling(.average, [3, 7, 31, 31], kernel: (3, 3), stride: (1, 1), padding: .same(.bottomRightHeavy)),
            .pooling(.average, [1, 7, 32, 33], kernel: (2, 2), stride: (2, 2), padding: .same(.topLeftHeavy), excludePadding: false),
            .pooling(.average, [1, 1, 63, 65], kernel: (3, 2), stride: (2, 3), padding: .valid(top: 1, bottom: 0, left: 0, right: 2),
                     excludePadding: false),
            .globalPooling(.average, [3, 65, 7, 7]),
            .globalPooling(.average, [1, 63, 13, 13]),
            .globalPooling(.max, [1, 33, 1, 1]),

            OpCase(.concat(channels: [1, 32, 7], batch: 3, spatial: 33)),
            OpCase(.concat(channels: [65, 63, 1], batch: 1, spatial: 1)),
            OpCase(.concat(channels: [7, 31, 33], batch: 1, spatial: 49)),

            OpCase(.softmax(SoftmaxGeometry(batch: 3, channels: 7, spatial: 33))),
            OpCase(.softmax(SoftmaxGeometry(batch: 1, channels: 65, spatial: 1))),
            OpCase(.softmax(SoftmaxGeometry(batch: 3, channels: 1, spatial: 7))),
            OpCase(.softmax(SoftmaxGeometry(batch: 1, channels: 1000, spatial: 1))),
            OpCase(.softmaxCrossEntropy(batch: 3, classes: 7)),
            OpCase(.softmaxCrossEntropy(batch: 1, classes: 65)),
            OpCase(.softmaxCrossEntropy(batch: 32, classes: 10)),
            OpCase(.softmaxCrossEntropy(batch: 3, classes: 1000)),
            OpCase(.softmaxCrossEntropy(batch: 7, classes: 5), values: .coarse),  // arg-max ties
            OpCase(.meanSquaredError(count: 1)),
            OpCase(.meanSquaredError(count: 7)),
            OpCase(.meanSquaredError(count: 65 * 63)),

            OpCase(.channelAffine([3, 33, 7, 7])),
            OpCase(.channelAffine([1, 65, 1, 1])),
            OpCase(.channelAffine([3, 1, 31, 31])),
            OpCase(.elementwise(.add, count: 65 * 63)),
            OpCase(.elementwise(.multiply, count: 33)),
            OpCase(.elementwise(.add, count: 1)),

            OpCase(.sgd(SGDHyperparameters(learningRate: 0.01, momentum: 0.9, weightDecay: 5e-4), count: 65, steps: 3)),
            OpCase(.sgd(SGDHyperparameters(learningRate: 0.1), count: 65 * 63, steps: 2)),
            OpCase(.adam(AdamHyperparameters(learningRate: 1e-3), count: 65, steps: 3)),
            OpCase(.adam(AdamHyperparameters(learningRate: 0.01, weightDecay: 0.01), count: 1, steps: 5)),
        ] + [OpCase].spatialFull + [OpCase].broadcastFull + OpCase.layoutFull + [OpCase].layerNormalizationFull
    }

    /// The first case of every op, in list order.
    public func firstOfEachOp() -> [OpCase] {
        var seen = Set<String>()
        return filter { seen.insert($0.op).inserted }
    }

    /// The cases whose op name contains `filter` (see `OpCase.matches`).
    public func matching(_ filter: String?) -> [OpCase] { self.filter { $0.matches(filter) } }
}
