import XCTest
@testable import UpdraftModel
@testable import UpdraftData
@testable import UpdraftTraining

final class DataPreprocessingTests: XCTestCase {
    private let gray2x2 = DecodedImage(width: 2, height: 2, channels: 1, pixels: [0, 100, 200, 40])

    /// 2x2 -> 4x4 (upscaling: the triangle keeps half-width 1), worked by hand with centers
    /// (o + 0.5) / 2 and taps clipped to the image: output 0 -> pixel 0 alone, 1 -> 0.75/0.25,
    /// 2 -> 0.25/0.75, 3 -> the last pixel; rows then columns, each rounded to 8 bits (Pillow's values).
    func testTriangleUpscaleHandWorked() {
        let prepared = ImagePreprocessing(width: 4, height: 4, colorSpace: .grayscale).prepare(gray2x2)
        XCTAssertEqual(prepared.samples, [0, 25, 75, 100, 50, 59, 76, 85, 150, 126, 79, 55, 200, 160, 80, 40])
    }

    /// Downscaling widens the filter (antialiasing). 4 -> 2, triangle of half-width 2: output 0 has
    /// center 1 and taps 0, 1, 2 weighted 0.75, 0.75, 0.25 (normalised by 1.75): 30 / 1.75 = 17.1 -> 17;
    /// output 1 has center 3 and taps 1, 2, 3 weighted 0.25, 0.75, 0.75: 65 / 1.75 = 37.1 -> 37.
    /// The area filter averages the pairs. (Both as Pillow gives them.)
    func testDownscaleIsAntialiased() {
        let row = DecodedImage(width: 4, height: 1, channels: 1, pixels: [10, 20, 30, 50])
        XCTAssertEqual(ImagePreprocessing(width: 2, height: 1, colorSpace: .grayscale).prepare(row).samples, [17, 37])
        XCTAssertEqual(ImagePreprocessing(width: 2, height: 1, colorSpace: .grayscale, filter: .area).prepare(row).samples, [15, 40])
        let three = DecodedImage(width: 3, height: 1, channels: 1, pixels: [10, 20, 60])
        XCTAssertEqual(ImagePreprocessing(width: 2, height: 1, colorSpace: .grayscale).prepare(three).samples, [14, 45])
        XCTAssertEqual(ImagePreprocessing(width: 2, height: 1, colorSpace: .grayscale, filter: .area).prepare(three).samples, [15, 60])
    }

    func testSameSizeIsUnchanged() {
        let pixels: [UInt8] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18]
        let image = DecodedImage(width: 3, height: 2, channels: 3, pixels: pixels)
        let prepared = ImagePreprocessing(width: 3, height: 2, colorSpace: .rgb).prepare(image)
        // Planar: all reds, then greens, then blues.
        XCTAssertEqual(prepared.samples, [1, 4, 7, 10, 13, 16, 2, 5, 8, 11, 14, 17, 3, 6, 9, 12, 15, 18])
    }

    func testColorConversions() {
        let rgb = DecodedImage(width: 2, height: 1, channels: 3, pixels: [100, 150, 200, 255, 0, 10])
        // BT.601 luma: 0.299*100 + 0.587*150 + 0.114*200 = 140.75 -> 141; 0.299*255 + 0.114*10 = 77.385 -> 77.
        XCTAssertEqual(ImagePreprocessing(width: 2, height: 1, colorSpace: .grayscale).prepare(rgb).samples, [141, 77])
        XCTAssertEqual(ImagePreprocessing(width: 2, height: 1, colorSpace: .bgr).prepare(rgb).samples,
                       [200, 10, 150, 0, 100, 255])
        let gray = DecodedImage(width: 2, height: 1, channels: 1, pixels: [7, 250])
        XCTAssertEqual(ImagePreprocessing(width: 2, height: 1, colorSpace: .rgb).prepare(gray).samples,
                       [7, 250, 7, 250, 7, 250])
        XCTAssertEqual(ImagePreprocessing(width: 2, height: 1, colorSpace: .bgr).prepare(gray).samples,
                       [7, 250, 7, 250, 7, 250])
    }

    func testScalerAppliesPerChannelBiasInTensorOrder() {
        let image = DecodedImage(width: 1, height: 2, channels: 3, pixels: [10, 20, 30, 40, 50, 60])
        let scaler = ImagePreprocessing.Scaler(channelScale: 0.5, redBias: -1, greenBias: -2, blueBias: -3, grayBias: -4)

        let rgb = ImagePreprocessing(width: 1, height: 2, colorSpace: .rgb, scaler: scaler).tensor(from: image)
        XCTAssertEqual(rgb.shape, [3, 2, 1])
        let rgbExpected: [Float] = [5 - 1, 20 - 1, 10 - 2, 25 - 2, 15 - 3, 30 - 3]  // 0.5 * x + bias
        XCTAssertEqual(rgb.data, rgbExpected)

        let bgr = ImagePreprocessing(width: 1, height: 2, colorSpace: .bgr, scaler: scaler).tensor(from: image)
        let bgrExpected: [Float] = [15 - 3, 30 - 3, 10 - 2, 25 - 2, 5 - 1, 20 - 1]
        XCTAssertEqual(bgr.data, bgrExpected)

        let grayImage = DecodedImage(width: 2, height: 1, channels: 1, pixels: [0, 255])
        let gray = ImagePreprocessing(width: 2, height: 1, colorSpace: .grayscale, scaler: scaler).tensor(from: grayImage)
        XCTAssertEqual(gray.shape, [1, 1, 2])
        XCTAssertEqual(gray.data, [-4, 127.5 - 4])

        let identity = ImagePreprocessing(width: 2, height: 1, colorSpace: .grayscale).tensor(from: grayImage)
        XCTAssertEqual(identity.data, [0, 255])
    }

    func testResizeThenConvertThroughTheWholePipeline() {
        // A gray 2x2 image into a 4x4 RGB model with a 1/255 scale: every channel is the resized gray.
        let pre = ImagePreprocessing(width: 4, height: 4, colorSpace: .rgb, scaler: .init(channelScale: 1 / 255.0))
        let tensor = pre.tensor(from: gray2x2)
        XCTAssertEqual(tensor.shape, pre.tensorShape)
        XCTAssertEqual(pre.tensorShape, [3, 4, 4])
        let plane = Array(tensor.data[0..<16])
        XCTAssertEqual(Array(tensor.data[16..<32]), plane)
        XCTAssertEqual(Array(tensor.data[32..<48]), plane)
        XCTAssertEqual(plane[5], 59 / 255.0, accuracy: 1e-6)
    }

    func testFromModelImageType() throws {
        let scaler = ImageScaler(channelScale: 2, redBias: 1, greenBias: 2, blueBias: 3)
        let bgr = try ImagePreprocessing(image: ImageFeatureType(width: 5, height: 4, colorSpace: .bgr), scaler: scaler)
        XCTAssertEqual(bgr.tensorShape, [3, 4, 5])
        XCTAssertEqual(bgr.channelBiases, scaler.biases(for: .bgr))
        let gray = try ImagePreprocessing(image: ImageFeatureType(width: 2, height: 2, colorSpace: .grayscaleFloat16), scaler: nil)
        XCTAssertEqual(gray.colorSpace, .grayscale)
        XCTAssertEqual(gray.scaler, .identity)
        XCTAssertThrowsError(try ImagePreprocessing(image: ImageFeatureType(width: 2, height: 2, colorSpace: .other(99)), scaler: nil))
        XCTAssertThrowsError(try ImagePreprocessing(image: ImageFeatureType(width: 0, height: 2, colorSpace: .rgb), scaler: nil))
    }

    func testInvalidSizeIsRejected() {
        XCTAssertThrowsError(try ImagePreprocessing(width: 0, height: 4, colorSpace: .rgb).validate())
    }
}
