import Foundation

/// What an image input of a model expects, and how a decoded image becomes its input tensor.
///
/// This mirrors Core ML: the model's `ImageFeatureType` gives the size and color space, and its
/// `NeuralNetworkImageScaler` gives `y[c] = channelScale * x[c] + bias[c]` with `x` in 0...255.
/// An image goes through two stages:
///
/// 1. `prepare`: resized to `width` x `height` with bilinear interpolation (half-pixel centers,
///    "align corners = false", no antialiasing: the same sampling as OpenCV's `INTER_LINEAR` and
///    PyTorch's `interpolate(mode: "bilinear", align_corners: False)`), converted to the color space,
///    and rounded to 8 bits, planar. This is the pixel buffer the model would receive on device,
///    and it is what datasets keep in memory (one byte per sample).
/// 2. `tensor(from:)`: the scaler applied, giving a float tensor of shape **`[C, H, W]`** with no batch
///    dimension (C = 3 for RGB/BGR in that channel order, 1 for grayscale). Batches stack these into
///    `[N, C, H, W]`.
///
/// Gray from RGB uses the ITU-R BT.601 luma weights, `0.299 R + 0.587 G + 0.114 B`; RGB from gray
/// repeats the gray value in every channel.
public struct ImagePreprocessing: Equatable, Sendable {
    public enum ColorSpace: String, Sendable, CaseIterable {
        case rgb, bgr, grayscale
    }

    /// Core ML's image scaler, `y = channelScale * x + bias` per channel with `x` in 0...255: the same
    /// type the model spec uses, so a model's scaler can be passed as it is.
    public typealias Scaler = ImageScaler

    public var width: Int
    public var height: Int
    public var colorSpace: ColorSpace
    public var scaler: Scaler

    public init(width: Int, height: Int, colorSpace: ColorSpace, scaler: Scaler = .identity) {
        self.width = width
        self.height = height
        self.colorSpace = colorSpace
        self.scaler = scaler
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
    }

    /// Stage 1: the image at the model's size and color space, 8 bits per sample, planar `[C, H, W]`.
    public func prepare(_ image: DecodedImage) -> PreparedImage {
        // Convert to the output's content channels at the source size first (RGB->gray is cheaper
        // before resizing), then resize each plane. Both steps are linear, so the order does not
        // change the result beyond float rounding.
        let srcPlane = image.width * image.height
        var planes: [[Float]]
        if image.channels == 1 {
            planes = [image.pixels.map(Float.init)]
        } else if colorSpace == .grayscale {
            var gray = [Float](repeating: 0, count: srcPlane)
            image.pixels.withUnsafeBufferPointer { p in
                for i in 0..<srcPlane {
                    gray[i] = 0.299 * Float(p[3 * i]) + 0.587 * Float(p[3 * i + 1]) + 0.114 * Float(p[3 * i + 2])
                }
            }
            planes = [gray]
        } else {
            let order = colorSpace == .bgr ? [2, 1, 0] : [0, 1, 2]
            planes = order.map { c in
                var plane = [Float](repeating: 0, count: srcPlane)
                image.pixels.withUnsafeBufferPointer { p in
                    for i in 0..<srcPlane { plane[i] = Float(p[3 * i + c]) }
                }
                return plane
            }
        }
        let resized = planes.map {
            bilinearResize($0, width: image.width, height: image.height, toWidth: width, toHeight: height)
        }
        // Gray source into a color model: the one plane fills every channel.
        let outPlane = width * height
        var samples = [UInt8](repeating: 0, count: channels * outPlane)
        samples.withUnsafeMutableBufferPointer { out in
            for c in 0..<channels {
                resized[min(c, resized.count - 1)].withUnsafeBufferPointer { plane in
                    let base = c * outPlane
                    for i in 0..<outPlane {
                        // Resampled values stay within 0...255 (convex combinations), up to rounding.
                        out[base + i] = UInt8(clamping: Int(max(0, plane[i] + 0.5)))
                    }
                }
            }
        }
        return PreparedImage(channels: channels, height: height, width: width, samples: samples)
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
    public var channels: Int
    public var height: Int
    public var width: Int
    public var samples: [UInt8]

    public init(channels: Int, height: Int, width: Int, samples: [UInt8]) {
        precondition(samples.count == channels * height * width, "PreparedImage: sample count does not match its shape")
        self.channels = channels
        self.height = height
        self.width = width
        self.samples = samples
    }
}

/// Where output coordinate `o` samples the input, for bilinear resizing with half-pixel centers:
/// `s = (o + 0.5) * in / out - 0.5`, clamped to the image, split into the two neighbours and the
/// second one's weight.
struct BilinearTap {
    var lower: Int
    var upper: Int
    var weight: Float

    static func taps(from inSize: Int, to outSize: Int) -> [BilinearTap] {
        let ratio = Double(inSize) / Double(outSize)
        return (0..<outSize).map { o in
            let s = max(0, (Double(o) + 0.5) * ratio - 0.5)
            let lower = min(Int(s), inSize - 1)
            let upper = min(lower + 1, inSize - 1)
            return BilinearTap(lower: lower, upper: upper, weight: Float(s - Double(lower)))
        }
    }
}

/// Bilinear resize of one plane (row-major, `height` x `width`), align-corners false.
func bilinearResize(_ plane: [Float], width: Int, height: Int, toWidth: Int, toHeight: Int) -> [Float] {
    if width == toWidth && height == toHeight { return plane }
    let xs = BilinearTap.taps(from: width, to: toWidth)
    let ys = BilinearTap.taps(from: height, to: toHeight)
    var out = [Float](repeating: 0, count: toWidth * toHeight)
    plane.withUnsafeBufferPointer { p in
        xs.withUnsafeBufferPointer { xs in
            out.withUnsafeMutableBufferPointer { out in
                for oy in 0..<toHeight {
                    let ty = ys[oy]
                    let row0 = ty.lower * width, row1 = ty.upper * width, outRow = oy * toWidth
                    for ox in 0..<toWidth {
                        let tx = xs[ox]
                        let a = p[row0 + tx.lower], b = p[row0 + tx.upper]
                        let c = p[row1 + tx.lower], d = p[row1 + tx.upper]
                        let top = a + tx.weight * (b - a)
                        let bottom = c + tx.weight * (d - c)
                        out[outRow + ox] = top + ty.weight * (bottom - top)
                    }
                }
            }
        }
    }
    return out
}
