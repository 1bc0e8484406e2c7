import UpdraftCore

/// Image folders write their examples' samples straight into the trainer's staging rows (pixel upload).
extension ImageFolderDataset: PixelBatchProvider {
    /// `[C, H, W]` of the model's image input.
    public var pixelShape: Shape { preprocessing.tensorShape }

    /// True unless the preprocessing scales on the host (a scaler other than identity): then the
    /// examples' inputs are not the samples.
    public var writesPixels: Bool { preprocessing.scaler == .identity }

    /// Example `index`'s image decoded and prepared into `samples` (from the decoded-image cache when
    /// it holds it, which it then keeps while there is room). The header is checked against the pixel
    /// cap first; the decode reserves its memory in the decode budget.
    public func writePixels(at index: Int, into samples: UnsafeMutableBufferPointer<UInt8>) throws {
        try checkIndex(index)
        try checkPixelBuffer(samples)
        if cache?.copy(at: index, into: samples) == true { return }
        let p = preprocessing, path = files[index].path
        let header = try ImageHeader(contentsOfFile: path, limits: limits)
        try budget.withReservation(header.decodeBytes) {
            p.prepare(try DecodedImage(contentsOfFile: path, limits: limits, atLeast: p.decodeAtLeast), crop: nil,
                      into: samples.baseAddress!)
        }
        cache?.store(UnsafeBufferPointer(samples), at: index)
    }

    /// With a random resized crop: the image decoded in full and the rectangle `augmentation` picks
    /// for `(seed, epoch, index)` resized into `samples` (never cached); without one, `writePixels(at:into:)`.
    public func writePixels(at index: Int, epoch: Int, augmentation: ImageAugmentation,
                            into samples: UnsafeMutableBufferPointer<UInt8>) throws {
        guard augmentation.randomResizedCrop != nil else { return try writePixels(at: index, into: samples) }
        try checkIndex(index)
        try checkPixelBuffer(samples)
        let path = files[index].path
        let header = try ImageHeader(contentsOfFile: path, limits: limits)
        try budget.withReservation(header.decodeBytes) {
            let image = try DecodedImage(contentsOfFile: path, limits: limits)
            let rect = augmentation.cropRect(epoch: epoch, index: index, width: image.width, height: image.height)
            preprocessing.prepare(image, crop: rect, into: samples.baseAddress!)
        }
    }
}
