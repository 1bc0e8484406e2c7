/// Random horizontal and vertical flips of image tensors, reproducible: the flips applied to an
/// example depend only on `(seed, epoch, index)`, never on the order examples are drawn in or on
/// which thread draws them, so a run with the same seed repeats exactly.
///
/// Each enabled flip happens with probability 1/2. Both coin tosses are always drawn, so enabling or
/// disabling one flip does not change the other's choices.
public struct ImageAugmentation: Equatable, Sendable {
    /// Mirror left-right (reverse each row).
    public var horizontalFlip: Bool
    /// Mirror top-bottom (reverse the row order).
    public var verticalFlip: Bool
    public var seed: UInt64

    public init(horizontalFlip: Bool = false, verticalFlip: Bool = false, seed: UInt64 = 0) {
        self.horizontalFlip = horizontalFlip
        self.verticalFlip = verticalFlip
        self.seed = seed
    }

    /// No augmentation.
    public static let none = ImageAugmentation()

    public var isIdentity: Bool { !horizontalFlip && !verticalFlip }

    /// The flips applied to example `index` in `epoch`.
    public func flips(epoch: Int, index: Int) -> (horizontal: Bool, vertical: Bool) {
        var rng = SplitMix64(seed: Self.mix(Self.mix(seed, UInt64(bitPattern: Int64(epoch))),
                                            UInt64(bitPattern: Int64(index))))
        let horizontal = rng.next() >> 63 == 1
        let vertical = rng.next() >> 63 == 1
        return (horizontalFlip && horizontal, verticalFlip && vertical)
    }

    /// Applies this example's flips to an image tensor. The last two dimensions are height and width;
    /// any leading dimensions (`[C, H, W]`, or `[1, C, H, W]`) are planes flipped alike.
    /// - Throws: `.invalidArgument` for a tensor of rank below 2.
    public func apply(to tensor: Tensor, epoch: Int, index: Int) throws -> Tensor {
        let (horizontal, vertical) = flips(epoch: epoch, index: index)
        if !horizontal && !vertical { return tensor }
        let dims = tensor.shape.dims
        guard dims.count >= 2 else {
            throw UpdraftError(.invalidArgument, "cannot flip a tensor of shape \(tensor.shape)",
                               hint: "flips apply to image tensors [C, H, W]; turn augmentation off for other inputs")
        }
        return Self.flipped(tensor, horizontal: horizontal, vertical: vertical)
    }

    /// `tensor` mirrored over its last two dimensions.
    static func flipped(_ tensor: Tensor, horizontal: Bool, vertical: Bool) -> Tensor {
        let dims = tensor.shape.dims
        let height = dims[dims.count - 2], width = dims[dims.count - 1]
        let plane = height * width
        guard plane > 0 else { return tensor }
        var out = [Float](repeating: 0, count: tensor.count)
        tensor.data.withUnsafeBufferPointer { src in
            for p in 0..<(tensor.count / plane) {
                for y in 0..<height {
                    let sy = vertical ? height - 1 - y : y
                    let from = p * plane + sy * width, to = p * plane + y * width
                    for x in 0..<width { out[to + x] = src[from + (horizontal ? width - 1 - x : x)] }
                }
            }
        }
        return Tensor(shape: tensor.shape, data: out)
    }

    /// Folds `value` into `state` through one SplitMix64 step.
    private static func mix(_ state: UInt64, _ value: UInt64) -> UInt64 {
        var rng = SplitMix64(seed: state ^ (value &* 0xD1B5_4A32_D192_ED03))
        return rng.next()
    }
}

/// A provider whose image inputs are flipped by an `ImageAugmentation` for one epoch. The trainer
/// sets `epoch` (or calls `forEpoch`) before each pass; targets are passed through unchanged.
public struct AugmentedBatchProvider<Base: BatchProvider>: BatchProvider {
    public var base: Base
    public var augmentation: ImageAugmentation
    public var epoch: Int

    public init(_ base: Base, augmentation: ImageAugmentation, epoch: Int = 0) {
        self.base = base
        self.augmentation = augmentation
        self.epoch = epoch
    }

    /// The same provider for another epoch.
    public func forEpoch(_ epoch: Int) -> AugmentedBatchProvider {
        var copy = self
        copy.epoch = epoch
        return copy
    }

    public var count: Int { base.count }

    public func example(at index: Int) throws -> TrainingExample {
        var example = try base.example(at: index)
        example.input = try augmentation.apply(to: example.input, epoch: epoch, index: index)
        return example
    }
}
