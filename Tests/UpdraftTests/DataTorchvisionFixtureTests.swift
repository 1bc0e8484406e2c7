import Foundation
import XCTest
@testable import UpdraftData
@testable import UpdraftTraining

/// Updraft's preprocessing against torchvision's (PIL backend) on committed fixtures made by
/// Tests/Scripts/make_torchvision_fixtures.py: stretch (triangle and area filters, down and up),
/// shorter side + center crop, and a resized crop — every sample within one grey level.
final class DataTorchvisionFixtureTests: XCTestCase {
    private struct Manifest: Decodable {
        struct Case: Decodable {
            var transform: String
            var input: String
            var expected: String
            var width: Int
            var height: Int
            var filter: String
            var shorterSide: Int?
            var top: Int?
            var left: Int?
            var cropWidth: Int?
            var cropHeight: Int?
        }
        var cases: [Case]
    }

    func testPreprocessingMatchesTorchvisionWithinOneGreyLevel() throws {
        let folder = Fixtures.url("torchvision")
        let manifest = try JSONDecoder().decode(Manifest.self, from: Data(contentsOf: folder.appendingPathComponent("manifest.json")))
        XCTAssertGreaterThanOrEqual(manifest.cases.count, 27)
        var exact = 0, total = 0
        for (n, c) in manifest.cases.enumerated() {
            let image = try DecodedImage(contentsOf: folder.appendingPathComponent(c.input))
            let expected = try DecodedImage(contentsOf: folder.appendingPathComponent(c.expected))
            XCTAssertEqual([expected.width, expected.height, expected.channels], [c.width, c.height, 3], "case \(n)")
            var pre = ImagePreprocessing(width: c.width, height: c.height, colorSpace: .rgb,
                                         filter: try XCTUnwrap(ResampleFilter(rawValue: c.filter)))
            var crop: PixelRect?
            switch c.transform {
            case "stretch": break
            case "centerCrop": pre.resize = .centerCrop(shorterSide: c.shorterSide)
            case "resizedCrop":
                crop = PixelRect(x: try XCTUnwrap(c.left), y: try XCTUnwrap(c.top),
                                 width: try XCTUnwrap(c.cropWidth), height: try XCTUnwrap(c.cropHeight))
            default: XCTFail("unknown transform \(c.transform)"); continue
            }
            let got = pre.prepare(image, crop: crop)
            var worst = 0
            for y in 0..<c.height {
                for x in 0..<c.width {
                    for ch in 0..<3 {
                        let a = Int(got.samples[(ch * c.height + y) * c.width + x]), b = Int(expected[x, y, ch])
                        worst = max(worst, abs(a - b))
                        exact += a == b ? 1 : 0
                        total += 1
                    }
                }
            }
            XCTAssertLessThanOrEqual(worst, 1, "case \(n): \(c.transform) of \(c.input) to \(c.width)x\(c.height) (\(c.filter))")
        }
        // The same fixed-point arithmetic as Pillow's, so nearly every sample is identical.
        XCTAssertGreaterThan(Double(exact) / Double(total), 0.99, "\(exact) of \(total) samples identical")
    }

    /// torchvision's RandomResizedCrop parameters: the rectangle lies inside the image, its area is
    /// within the scale range (or the fallback center crop), and it depends only on (seed, epoch, index).
    func testRandomResizedCropRectangles() throws {
        let a = ImageAugmentation(randomResizedCrop: 0.08...1, seed: 7)
        var areas: [Double] = []
        for index in 0..<200 {
            let r = try XCTUnwrap(a.cropRect(epoch: 1, index: index, width: 500, height: 375))
            XCTAssertTrue(r.x >= 0 && r.y >= 0 && r.x + r.width <= 500 && r.y + r.height <= 375, "\(r)")
            let fraction = Double(r.width * r.height) / (500 * 375)
            XCTAssertTrue(fraction >= 0.07 && fraction <= 1.0, "\(r)")
            let ratio = Double(r.width) / Double(r.height)
            XCTAssertTrue(ratio > 0.7 && ratio < 1.4, "\(r)")
            areas.append(fraction)
            XCTAssertEqual(a.cropRect(epoch: 1, index: index, width: 500, height: 375), r)
        }
        XCTAssertNotEqual(a.cropRect(epoch: 2, index: 0, width: 500, height: 375), a.cropRect(epoch: 1, index: 0, width: 500, height: 375))
        XCTAssertGreaterThan(areas.max()! - areas.min()!, 0.5, "the areas spread over the range")
        XCTAssertNil(ImageAugmentation.none.cropRect(epoch: 0, index: 0, width: 5, height: 5))
        XCTAssertThrowsError(try ImageAugmentation(randomResizedCrop: 0...1).validate())
    }
}
