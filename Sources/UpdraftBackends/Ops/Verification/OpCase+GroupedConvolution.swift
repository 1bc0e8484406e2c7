// Depthwise and grouped convolutions on the sizes their fast paths (CPUBackend+GroupedConvolution,
// Kernels/grouped_convolution.cl) can get wrong: odd channel counts, multipliers above 1, stride 2
// (and 2x1) over odd planes, asymmetric and same padding, dilation, 5x5 and 3x1 kernels, a 1x1 plane
// smaller than the kernel's reach, no bias, a fused ReLU, batch 1 and 3, and a grouped case too deep
// for the direct path (it must still agree through the GEMM path).

extension Array where Element == OpCase {
    /// Depthwise and grouped convolution cases aimed at the grouped fast paths (see the notes at the top of this file).
    public static var groupedConvolution: [OpCase] {
        [
            // depthwise (one input channel per group)
            .convolution([3, 7, 9, 11], outputChannels: 7, kernel: (3, 3), groups: 7, padding: .same(.bottomRightHeavy)),
            .convolution([2, 5, 8, 7], outputChannels: 10, kernel: (3, 3), stride: (2, 2), groups: 5,
                         padding: .valid(top: 1, bottom: 0, left: 1, right: 2)),
            .convolution([1, 3, 11, 10], outputChannels: 9, kernel: (3, 3), dilation: (2, 2), groups: 3,
                         padding: .same(.topLeftHeavy), fusedReLU: true),
            .convolution([3, 9, 17, 15], outputChannels: 9, kernel: (5, 5), stride: (2, 2), groups: 9,
                         padding: .valid(top: 2, bottom: 2, left: 2, right: 2), bias: false),
            .convolution([1, 6, 9, 7], outputChannels: 6, kernel: (3, 1), stride: (2, 1), groups: 6),
            .convolution([3, 5, 1, 1], outputChannels: 5, kernel: (3, 3), groups: 5, padding: .same(.bottomRightHeavy)),
            .convolution([2, 8, 33, 31], outputChannels: 8, kernel: (3, 3), stride: (2, 2), groups: 8,
                         padding: .valid(top: 1, bottom: 1, left: 1, right: 1)),
            // grouped, a few channels per group
            .convolution([3, 6, 7, 9], outputChannels: 9, kernel: (3, 3), groups: 3,
                         padding: .valid(top: 1, bottom: 1, left: 1, right: 1)),
            .convolution([2, 9, 13, 11], outputChannels: 6, kernel: (3, 3), stride: (2, 2), dilation: (2, 2), groups: 3,
                         padding: .same(.bottomRightHeavy), bias: false, fusedReLU: true),
            // grouped, too deep for the direct path
            .convolution([2, 16, 7, 7], outputChannels: 8, kernel: (3, 3), groups: 2, padding: .same(.bottomRightHeavy)),
        ]
    }
}
