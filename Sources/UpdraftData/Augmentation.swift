import Foundation
import UpdraftCore

/// Training augmentation of images, reproducible: what is applied to an example depends only on
/// `(seed, epoch, index)`, never on the order examples are drawn in or on which thread draws them, so
/// a run with the same seed repeats exactly.
///
/// - Flips: each enabled flip happens with probability 1/2. Both coin tosses are always drawn, so
///   enabling or disabling one flip does not change the other's choices. Flips apply to the input
///   tensor, so any data set can use them.
/// - Random resized crop (torchvision's `RandomResizedCrop` with ratio 3/4...4/3): a rectangle of
///   random area (a fraction in `randomResizedCrop` of the image's) and aspect ratio is cut from the
///   decoded image and resized to the model's size. It needs the decoded image, so only image data
///   sets (`EpochAugmentedProvider`) take it. It changes the frozen layers' input every epoch, so the
///   feature cache is off with it.
public struct ImageAugmentation: Equatable, Sendable {
    /// Mirror left-right (reverse each row).
    public var horizontalFlip: Bool
    /// Mirror top-bottom (reverse the row order).
    public var verticalFlip: Bool
    /// The range of the crop's area as a fraction of the image's (torchvision's `scale`); nil: no crop.
    public var randomResizedCrop: ClosedRange<Double>?
    /// Seeds every random choice together with the epoch and example index; default 0.
    public var seed: UInt64

    /// An augmentation with the given flips and crop (none by default), seeded by `seed`.
    public init(horizontalFlip: Bool = false, verticalFlip: Bool = false, randomResizedCrop: ClosedRange<Double>? = nil,
                seed: UInt64 = 0) {
        self.horizontalFlip = horizontalFlip
        self.verticalFlip = verticalFlip
        self.randomResizedCrop = randomResizedCrop
        self.seed = seed
    }

    /// No augmentation.
    public static let none = ImageAugmentation()

    /// No flips (what `apply(to:epoch:index:)` does). A random resized crop is applied by the data set.
    public var isIdentity: Bool { !horizontalFlip && !verticalFlip }

    /// Throws unless the crop's scale range is usable.
    public func validate() throws {
        if let r = randomResizedCrop, !(r.lowerBound > 0 && r.upperBound <= 1 && r.lowerBound.isFinite) {
            throw UpdraftError(.invalidArgument, "random resized crop scale \(r.lowerBound),\(r.upperBound) is not usable",
                               hint: "give --random-resized-crop MIN,MAX with 0 < MIN <= MAX <= 1, e.g. 0.08,1")
        }
    }

    /// The rectangle example `index` in `epoch` is cut from an image of `width` x `height`, by
    /// torchvision's `RandomResizedCrop.get_params` (ten tries, then a center crop of clamped aspect
    /// ratio) with this type's seeded generator; nil without a crop.
    public func cropRect(epoch: Int, index: Int, width: Int, height: Int) -> PixelRect? {
        guard let scale = randomResizedCrop else { return nil }
        var rng = SplitMix64(seed: Self.mix(Self.mix(seed ^ 0x5EED_C0DE_CA7F_00D5, UInt64(bitPattern: Int64(epoch))),
                                            UInt64(bitPattern: Int64(index))))
        func uniform() -> Double { Double(rng.next() >> 11) * 0x1.0p-53 }
        let area = Double(width * height)
        let logLow = log(3.0 / 4.0), logHigh = log(4.0 / 3.0)
        for _ in 0..<10 {
            let target = area * (scale.lowerBound + (scale.upperBound - scale.lowerBound) * uniform())
            let aspect = exp(logLow + (logHigh - logLow) * uniform())
            let w = Int((target * aspect).squareRoot().rounded(.toNearestOrEven))
            let h = Int((target / aspect).squareRoot().rounded(.toNearestOrEven))
            if w > 0 && w <= width && h > 0 && h <= height {
                let top = Int(rng.next() % UInt64(height - h + 1))
                let left = Int(rng.next() % UInt64(width - w + 1))
                return PixelRect(x: left, y: top, width: w, height: h)
            }
        }
        let ratio = Double(width) / Double(height)
        var w = width, h = height
        if ratio < 3.0 / 4.0 {
            h = max(1, Int((Double(w) / (3.0 / 4.0)).rounded(.toNearestOrEven)))
        } else if ratio > 4.0 / 3.0 {
            w = max(1, Int((Double(h) * (4.0 / 3.0)).rounded(.toNearestOrEven)))
        }
        w = min(w, width); h = min(h, height)
        return PixelRect(x: (width - w) / 2, y: (height - h) / 2, width: w, height: h)
    }

    /// Example `index` of `provider` as training sees it in `epoch`: the random resized crop (done by
    /// the data set), then the flips.
    /// - Throws: `.invalidArgument` when a crop is asked of a data set that cannot crop; what the
    ///   data set throws.
    public func example(of provider: BatchProvider, at index: Int, epoch: Int) throws -> TrainingExample {
        var e: TrainingExample
        if randomResizedCrop != nil {
            guard let images = provider as? EpochAugmentedProvider else {
                throw UpdraftError(.invalidArgument, "a random resized crop needs an image data set",
                                   hint: "drop --random-resized-crop for .npy data")
            }
            e = try images.example(at: index, epoch: epoch, augmentation: self)
        } else {
            e = try provider.example(at: index)
        }
        if !isIdentity { e.input = try apply(to: e.input, epoch: epoch, index: index) }
        return e
    }

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

/// A data set that applies the augmentation that needs the decoded image (a random resized crop).
public protocol EpochAugmentedProvider: BatchProvider {
    /// Example `index` with `augmentation`'s crop for `epoch` applied (flips are not: the caller
    /// applies them to the tensor).
    func example(at index: Int, epoch: Int, augmentation: ImageAugmentation) throws -> TrainingExample
}

/// A provider whose image inputs are flipped by an `ImageAugmentation` for one epoch. The trainer
/// sets `epoch` (or calls `forEpoch`) before each pass; targets are passed through unchanged.
public struct AugmentedBatchProvider<Base: BatchProvider>: BatchProvider {
    /// The provider whose examples are augmented.
    public var base: Base
    /// What is applied to each example: the flips, and a random resized crop when `base` is an image data set.
    public var augmentation: ImageAugmentation
    /// The epoch whose random choices are applied (0-based); set it before each pass.
    public var epoch: Int

    /// Augments `base` with `augmentation` for `epoch` (default 0).
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

    /// As `BatchProvider.count`: the base provider's count.
    public var count: Int { base.count }

    /// Example `index` of the base provider with the augmentation chosen for `(seed, epoch, index)`: the crop (image data sets), then the flips.
    /// Throws `.invalidArgument` for a crop on a base that is not an `EpochAugmentedProvider`, and what the base throws.
    public func example(at index: Int) throws -> TrainingExample {
        try augmentation.example(of: base, at: index, epoch: epoch)
    }
}
