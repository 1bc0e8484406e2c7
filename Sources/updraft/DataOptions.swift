import Foundation
import Updraft
import UpdraftCommandLine

/// The image data options train, evaluate and predict share.
let imageDataOptionSpecs: [OptionSpec] = OptionSpec.table("""
    --resize stretch|shorter[:N]   stretch to the input size (default), or the shorter side to N (default: the input size) and the middle kept
    --center-crop                  torchvision's evaluation recipe: the shorter side to the input size / 0.875 (256 for 224), the middle kept
    --resize-filter triangle|area  antialiasing filter (default triangle: Pillow/torchvision bilinear)
    --no-dct-scaling               decode JPEGs at full size (exact torchvision samples; slower on large photos)
    --max-image-pixels N           refuse images declaring more pixels, before decoding (default \(ImageDecodingLimits.defaultMaxPixels), Pillow's)
    --image-cache-mib MIB          memory for decoded images (default: all of them if they fit in 512; 0: none)
    """)

/// The data options from the command line; `input` is the model's image input size.
func imageDataOptions(_ args: ParsedArguments, input: (width: Int, height: Int)?) throws -> ImageDataOptions {
    var options = ImageDataOptions()
    let side = max(input?.width ?? 0, input?.height ?? 0)
    switch args.value("resize") {
    case nil:
        if args.flag("center-crop") { options.resize = .centerCrop(shorterSide: Int((Double(side) / 0.875).rounded())) }
    case "stretch":
        if args.flag("center-crop") {
            throw UsageError("--center-crop keeps the middle of an image resized by its shorter side; it cannot go with --resize stretch")
        }
        options.resize = .stretch
    case let value? where value == "shorter" || value.hasPrefix("shorter:"):
        if value == "shorter" {
            options.resize = .centerCrop(shorterSide: nil)
        } else {
            guard let n = Int(value.dropFirst("shorter:".count)), (1...65535).contains(n) else {
                throw UsageError("--resize shorter:N needs N in 1...65535; got '\(value)'")
            }
            options.resize = .centerCrop(shorterSide: n)
        }
    case let value?:
        throw UsageError("--resize takes stretch, shorter or shorter:N; got '\(value)'")
    }
    if let f = args.value("resize-filter") {
        guard let filter = ResampleFilter(rawValue: f) else { throw UsageError("--resize-filter takes triangle or area; got '\(f)'") }
        options.filter = filter
    }
    options.dctScaling = !args.flag("no-dct-scaling")
    if let n = try args.int("max-image-pixels") {
        guard n >= 1 else { throw UsageError("--max-image-pixels must be at least 1; got \(n)") }
        options.limits = ImageDecodingLimits(maxPixels: n)
    }
    if let mib = try args.int("image-cache-mib") {
        guard mib >= 0, mib <= Int.max >> 20 else { throw UsageError("--image-cache-mib must be a number of MiB, 0 or more; got \(mib)") }
        options.imageCacheBytes = mib << 20
    }
    return options
}

/// `--random-resized-crop MIN,MAX`: the crop's area range as fractions of the image.
func randomResizedCropOption(_ args: ParsedArguments) throws -> ClosedRange<Double>? {
    guard let value = args.value("random-resized-crop") else { return nil }
    let parts = value.split(separator: ",").map { Double($0.trimmingCharacters(in: .whitespaces)) }
    guard parts.count == 2, let lo = parts[0], let hi = parts[1], lo > 0, lo <= hi, hi <= 1 else {
        throw UsageError("--random-resized-crop takes MIN,MAX with 0 < MIN <= MAX <= 1 (torchvision's default is 0.08,1); got '\(value)'")
    }
    return lo...hi
}
