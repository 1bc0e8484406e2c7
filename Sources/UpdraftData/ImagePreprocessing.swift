import Foundation
import UpdraftCore
import UpdraftModel

/// What an image input of a model expects, and how a decoded image becomes its input tensor.
///
/// This mirrors Core ML: the model's `ImageFeatureType` gives the size and color space, and its
/// `NeuralNetworkImageScaler` gives `y[c] = channelScale * x[c] + bias[c]` with `x` in 0...255.
/// An image goes through two stages:
///
/// 1. `prepare`: converted to the color space (gray from RGB with Pillow's integer BT.601 weights),
///    resized to the model's size by `resize` with an antialiased `filter` — the same samples as
///    Pillow's `resize` and so torchvision's `Resize`/`CenterCrop` on PIL images — and laid out planar,
///    8 bits per sample. This is the pixel buffer the model would receive on device.
/// 2. `tensor(from:)`: the scaler applied, giving a float tensor of shape **`[C, H, W]`** with no batch
///    dimension (C = 3 for RGB/BGR in that channel order, 1 for grayscale). Batches stack these into
///    `[N, C, H, W]`.
///
/// RGB from gray repeats the gray value in every channel.
public struct ImagePreprocessing: Equatable, Sendable {
    /// The input's color space (Core ML's `ImageFeatureType.ColorSpace`): 3 channels in RGB or BGR order, or 1 gray channel.
    public enum ColorSpace: String, Sendable, CaseIterable {
        /// Three channels in R, G, B order; three in B, G, R order; or one gray channel.
        case rgb, bgr, grayscale
    }

    /// Core ML's image scaler, `y = channelScale * x + bias` per channel with `x` in 0...255: the same
    /// type the model spec uses, so a model's scaler can be passed as it is.
    public typealias Scaler = ImageScaler

    /// How an image becomes the model's size.
    public enum Resize: Equatable, Sendable, CustomStringConvertible {
        /// The whole image to width x height, aspect ratio not kept.
        case stretch
        /// The shorter side to `shorterSide` (nil: the larger of width and height), aspect ratio kept
        /// (the longer side truncated, as torchvision computes it), then the middle width x height kept
        /// (torchvision's `Resize(n)` then `CenterCrop`; a crop larger than the image pads with 0).
        case centerCrop(shorterSide: Int?)

        /// How the resize is described in summaries: "stretch", or "shorter side to N, center crop".
        public var description: String {
            switch self {
            case .stretch: return "stretch"
            case .centerCrop(let n): return "shorter side to \(n.map(String.init) ?? "the input size"), center crop"
            }
        }
    }

    /// The model input's width, in pixels.
    public var width: Int
    /// The model input's height, in pixels.
    public var height: Int
    /// The model input's color space; decides the channel count and order.
    public var colorSpace: ColorSpace
    /// The model's image scaler, applied in `tensor(from:)`; `.identity` when the model has none.
    public var scaler: Scaler
    /// How the image is fitted to width x height; default `.stretch`.
    public var resize: Resize = .stretch
    /// The antialiased resampling filter used to resize; default `.triangle`.
    public var filter: ResampleFilter = .triangle
    /// Let a JPEG decode at 1/2, 1/4 or 1/8 of its size (libjpeg's DCT scaling) when that still
    /// covers what the resize needs: much faster on large photos, a few grey levels from decoding in
    /// full (turn it off for torchvision-exact samples).
    public var dctScaling = true

    /// Preprocessing for a `width` x `height` input in `colorSpace`, with the given scaler, resize mode and filter.
    public init(width: Int, height: Int, colorSpace: ColorSpace, scaler: Scaler = .identity,
                resize: Resize = .stretch, filter: ResampleFilter = .triangle) {
        self.width = width
        self.height = height
        self.colorSpace = colorSpace
        self.scaler = scaler
        self.resize = resize
        self.filter = filter
    }

    /// What a model's image input wants: its size and color space, and its scaler (identity if none).
    /// - Throws: `.unsupported` for a color space other than RGB, BGR or grayscale.
    public init(image: ImageFeatureType, scaler: ImageScaler?) throws {
        let colorSpace: ColorSpace
        switch image.colorSpace {
        case .rgb: colorSpace = .rgb
        case .bgr: colorSpace = .bgr
        // GRAYSCALE_FLOAT16 differs only in the on-device pixel buffer; the values are the same.
        case .grayscale, .grayscaleFloat16: colorSpace = .grayscale
        case .other:
            throw UpdraftError(.unsupported, "image input color space \(image.colorSpace) is not one Updraft can prepare images for",
                               hint: "use an RGB, BGR or grayscale image input")
        }
        self.init(width: image.width, height: image.height, colorSpace: colorSpace, scaler: scaler ?? .identity)
        try validate()
    }

    /// What `model`'s image input wants.
    /// - Throws: `.invalidModel` when the model's input is not an image.
    public init(model: CoreMLModel) throws {
        guard let image = model.inputImage else {
            throw UpdraftError(.invalidModel, "the model's input \(model.inputFeature.map { "'\($0.name)' " } ?? "")is not an image",
                               hint: "use an image folder only with an image model; multi-array models take .npy data")
        }
        try self.init(image: image, scaler: model.imageScaler)
    }

    /// 3 for RGB and BGR, 1 for grayscale.
    public var channels: Int { colorSpace == .grayscale ? 1 : 3 }

    /// The shape of one example's tensor: `[C, H, W]`.
    public var tensorShape: Shape { [channels, height, width] }

    /// The bias added to each output channel, in the tensor's channel order.
    public var channelBiases: [Float] {
        switch colorSpace {
        case .rgb: return [scaler.redBias, scaler.greenBias, scaler.blueBias]
        case .bgr: return [scaler.blueBias, scaler.greenBias, scaler.redBias]
        case .grayscale: return [scaler.grayBias]
        }
    }

    /// Checks that the size can be produced.
    public func validate() throws {
        guard width > 0, height > 0, width <= 65535, height <= 65535 else {
            throw UpdraftError(.invalidArgument, "image input size \(width)x\(height) is not usable",
                               hint: "width and height must be 1...65535")
        }
        if case .centerCrop(let n?) = resize, !(1...65535).contains(n) {
            throw UpdraftError(.invalidArgument, "a shorter side of \(n) pixels is not usable",
                               hint: "give --resize shorter:N with N in 1...65535")
        }
    }

    /// The smallest decoded size that covers what `prepare` reads (for DCT-scaled JPEG decoding), or
    /// nil when scaling is off.
    public var decodeAtLeast: (width: Int, height: Int)? {
        guard dctScaling else { return nil }
        switch resize {
        case .stretch: return (width, height)
        case .centerCrop(let n):
            let side = n ?? max(width, height)
            return (side, side)
        }
    }

    /// The size `image` is resized to, and the window of it kept.
    func geometry(sourceWidth w: Int, sourceHeight h: Int) -> (width: Int, height: Int, window: PixelRect) {
        switch resize {
        case .stretch:
            return (width, height, PixelRect(x: 0, y: 0, width: width, height: height))
        case .centerCrop(let n):
            let side = n ?? max(width, height)
            // torchvision: the shorter side to `side`, the longer to int(side * long / short).
            let (rw, rh) = w <= h ? (side, max(1, Int(Double(side) * Double(h) / Double(w))))
                                  : (max(1, Int(Double(side) * Double(w) / Double(h))), side)
            // torchvision's CenterCrop: int(round((size - crop) / 2)), Python's round (half to even).
            let left = Int((Double(rw - width) / 2).rounded(.toNearestOrEven))
            let top = Int((Double(rh - height) / 2).rounded(.toNearestOrEven))
            return (rw, rh, PixelRect(x: left, y: top, width: width, height: height))
        }
    }

    /// Stage 1: the image at the model's size and color space, 8 bits per sample, planar `[C, H, W]`.
    public func prepare(_ image: DecodedImage) -> PreparedImage {
        prepare(image, crop: nil)
    }

    /// Stage 1 from the rectangle `crop` of the image (a random resized crop): that rectangle taken as
    /// the image, stretched to the model's size (torchvision's `resized_crop`). Nil: `prepare(_:)`.
    public func prepare(_ image: DecodedImage, crop: PixelRect?) -> PreparedImage {
        var samples = [UInt8](repeating: 0, count: channels * width * height)
        samples.withUnsafeMutableBufferPointer { prepare(image, crop: crop, into: $0.baseAddress!) }
        return PreparedImage(channels: channels, height: height, width: width, samples: samples)
    }

    /// Stage 1 written into `out` (`channels * height * width` bytes).
    public func prepare(_ image: DecodedImage, crop: PixelRect?, into out: UnsafeMutablePointer<UInt8>) {
        image.pixels.withUnsafeBufferPointer { pixels in
            var source = pixels.baseAddress!
            var sourceChannels = image.channels
            var gray: [UInt8] = []
            if image.channels == 3 && colorSpace == .grayscale {
                // Pillow's convert("L"): (R * 19595 + G * 38470 + B * 7471 + 0x8000) >> 16.
                let count = image.width * image.height
                gray = [UInt8](repeating: 0, count: count)
                gray.withUnsafeMutableBufferPointer { g in
                    for i in 0..<count {
                        let r = UInt32(source[3 * i]), gg = UInt32(source[3 * i + 1]), b = UInt32(source[3 * i + 2])
                        g[i] = UInt8((r * 19595 + gg * 38470 + b * 7471 + 0x8000) >> 16)
                    }
                }
                sourceChannels = 1
            }
            let planes: [Int]
            switch (sourceChannels, colorSpace) {
            case (1, .grayscale): planes = [0]
            case (1, _): planes = [0, 0, 0]
            case (_, .bgr): planes = [2, 1, 0]
            default: planes = [0, 1, 2]
            }
            let run = { (source: UnsafePointer<UInt8>) in
                if let crop {
                    resample(source, sourceWidth: image.width, channels: sourceChannels, rect: crop,
                             outWidth: width, outHeight: height, window: PixelRect(x: 0, y: 0, width: width, height: height),
                             filter: filter, planes: planes, into: out)
                } else {
                    let g = geometry(sourceWidth: image.width, sourceHeight: image.height)
                    resample(source, sourceWidth: image.width, channels: sourceChannels,
                             rect: PixelRect(x: 0, y: 0, width: image.width, height: image.height),
                             outWidth: g.width, outHeight: g.height, window: g.window, filter: filter, planes: planes, into: out)
                }
            }
            if gray.isEmpty {
                run(source)
            } else {
                gray.withUnsafeBufferPointer { source = $0.baseAddress!; run(source) }
            }
        }
    }

    /// Stage 2: the scaler applied to a prepared image, giving a `[C, H, W]` tensor.
    public func tensor(from prepared: PreparedImage) -> Tensor {
        var data = [Float](repeating: 0, count: prepared.samples.count)
        let plane = prepared.height * prepared.width
        let biases = channelBiases
        let scale = scaler.channelScale
        prepared.samples.withUnsafeBufferPointer { src in
            data.withUnsafeMutableBufferPointer { dst in
                for c in 0..<prepared.channels {
                    let bias = biases[min(c, biases.count - 1)]
                    for i in c * plane..<(c + 1) * plane { dst[i] = scale * Float(src[i]) + bias }
                }
            }
        }
        return Tensor(shape: [prepared.channels, prepared.height, prepared.width], data: data)
    }

    /// Both stages: a decoded image to the model's `[C, H, W]` input tensor.
    public func tensor(from image: DecodedImage) -> Tensor {
        tensor(from: prepare(image))
    }
}

extension ImageScaler {
    /// No scaling: the tensor holds the pixel values 0...255 (Core ML's behaviour without a scaler).
    public static let identity = ImageScaler(channelScale: 1)
}

/// An image ready for a model: at its size and in its color space, 8 bits per sample, planar, so
/// sample (c, y, x) is `samples[(c * height + y) * width + x]`.
public struct PreparedImage: Equatable, Sendable {
    /// Samples per pixel: 3 (RGB or BGR) or 1 (gray).
    public var channels: Int
    /// Rows, in pixels.
    public var height: Int
    /// Columns, in pixels.
    public var width: Int
    /// The `channels * height * width` samples, planar (channel, then row, then column).
    public var samples: [UInt8]

    /// An image from planar samples; `samples.count` must be `channels * height * width` (a precondition).
    public init(channels: Int, height: Int, width: Int, samples: [UInt8]) {
        precondition(samples.count == channels * height * width, "PreparedImage: sample count does not match its shape")
        self.channels = channels
        self.height = height
        self.width = width
        self.samples = samples
    }
}

