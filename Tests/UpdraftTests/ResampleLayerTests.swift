import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftData
@testable import UpdraftTraining

/// The resampling layers (Ops/Resample.swift): values Core ML itself gave (coremltools' own tests of
/// the runtime), shape rules and errors, and the models of Tests/Scripts/make_resample_fixtures.py
/// (built with coremltools, their values computed with numpy from NeuralNetwork.proto) read, run
/// forward to numpy's values, written back byte for byte and trained through on every backend.
final class ResampleLayerTests: XCTestCase {
    /// y of the reference for `op` on `x` of `shape`, checked against the CPU's.
    func forward(_ op: ResampleOp, _ x: [Double], _ shape: Shape) throws -> [Double] {
        let g = try SpatialOp.resampling(op).geometry(input: shape)
        let cpu = CPUBackend(threads: 2)
        let y = try cpu.makeBuffer(count: g.outputShape.count)
        try cpu.spatialForward(g, input: try cpu.makeBuffer(x.map(Float.init)), output: y)
        let reference = try Reference.spatialForward(g, input: x)
        for (a, b) in zip(try cpu.download(y), reference) { XCTAssertEqual(Double(a), b, accuracy: 1e-6, "\(op): CPU vs reference") }
        return reference
    }

    func assertClose(_ a: [Double], _ b: [Double], _ what: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(a.count, b.count, what, file: file, line: line)
        for (i, (x, y)) in zip(a, b).enumerated() { XCTAssertEqual(x, y, accuracy: 1e-6, "\(what)[\(i)]: \(a) vs \(b)", file: file, line: line) }
    }

    // MARK: Upsample by fractional factors

    /// coremltools' test of Core ML's upsample_bilinear (NN upsample with fractionalScalingFactor):
    /// [0, 1] by 2.6 with align_corners=False gives 5 values, the spacing 2/5 (Xin / Xout, not 1 / 2.6).
    func testFractionalUpsampleGivesCoreMLsValues() throws {
        let halfPixel = FractionalUpsampleSpec(scaleH: 1, scaleW: 2.6, mode: .alignCornersFalse)
        assertClose(try forward(.fractionalUpsample(halfPixel), [0, 1], [1, 1, 1, 2]), [0, 0.1, 0.5, 0.9, 1], "half-pixel x2.6")
        let corners = FractionalUpsampleSpec(scaleH: 1, scaleW: 2.5, mode: .alignCornersTrue)
        assertClose(try forward(.fractionalUpsample(corners), [0, 1], [1, 1, 1, 2]), [0, 0.25, 0.5, 0.75, 1], "align-corners x2.5")
        // Down: floor(4 x 0.75) = 3 rows on [0, 3]: spacing 1.5.
        let down = FractionalUpsampleSpec(scaleH: 0.75, scaleW: 1, mode: .alignCornersTrue)
        assertClose(try forward(.fractionalUpsample(down), [0, 10, 20, 30], [1, 1, 4, 1]), [0, 15, 30], "align-corners x0.75")
    }

    func testFractionalUpsampleReadsAndRefusesAsCoreMLDoes() throws {
        let input = FeatureDescription(name: "x", type: .multiArray(.init(shape: [2, 3, 4], dataType: .float32)))
        func layer(_ params: UpsampleLayerParams) throws -> GraphLayer {
            var b = try ModelBuilder(input: input)
            try b.add(LayerSpec(name: "up", inputs: ["x"], outputs: ["y"], params: .upsample(params)))
            return try XCTUnwrap(try NetworkGraph(model: b.build()).layer(named: "up"))
        }
        func error(_ params: UpsampleLayerParams) throws -> String {
            do { _ = try layer(params) } catch let e as UpdraftError { return "\(e.message) \(e.hint ?? "")" }
            XCTFail("\(params) was accepted")
            return ""
        }
        let up = try layer(UpsampleLayerParams(scalingFactor: [], fractionalScalingFactor: [1.5, 2.6], mode: 1, linearUpsampleMode: 2))
        XCTAssertEqual(up.outputShape, [1, 2, 4, 10], "floor(3 x 1.5), floor(4 x 2.6)")
        XCTAssertEqual(up.op, .spatial(.resampling(.fractionalUpsample(FractionalUpsampleSpec(scaleH: 1.5, scaleW: 2.6, mode: .alignCornersFalse)))))
        // Whole fractional factors are whole factors, as before.
        let whole = try layer(UpsampleLayerParams(scalingFactor: [], fractionalScalingFactor: [2, 1], mode: 0))
        XCTAssertEqual(whole.op, .spatial(.upsample(UpsampleSpec(scaleH: 2, scaleW: 1, mode: .nearest))))

        let nearest = try error(UpsampleLayerParams(scalingFactor: [], fractionalScalingFactor: [1.5, 1.5], mode: 0))
        XCTAssertTrue(nearest.contains("not supported with mode NN") && nearest.contains("ALIGN_CORNERS_FALSE"), nearest)
        let both = try error(UpsampleLayerParams(scalingFactor: [2, 2], fractionalScalingFactor: [1.5, 1.5], mode: 1, linearUpsampleMode: 1))
        XCTAssertTrue(both.contains("sets both scalingFactor [2, 2] and fractionalScalingFactor"), both)
        let tiny = try error(UpsampleLayerParams(scalingFactor: [], fractionalScalingFactor: [0.2, 1.5], mode: 1, linearUpsampleMode: 1))
        XCTAssertTrue(tiny.contains("floor(3 x 0.2) is 0") && tiny.contains("layer 'up' (upsample)"), tiny)
        let negative = try error(UpsampleLayerParams(scalingFactor: [], fractionalScalingFactor: [-1.5, 1.5], mode: 1, linearUpsampleMode: 1))
        XCTAssertTrue(negative.contains("must be positive"), negative)
    }

    func testFractionalUpsampleFixture() throws {
        try assertFixture("upsample_fractional", layers: ["upHalf", "upCorners"], types: ["upsample"])
    }

    // MARK: resizeBilinear

    /// coremltools' test of Core ML's resize_bilinear: [0, 1] to 5 samples in three SamplingModes
    /// (STRICT_ALIGN_CORNERS, DEFAULT and OFFSET_CORNERS map to STRICT_ALIGN_ENDPOINTS_MODE, UPSAMPLE_MODE
    /// and ROI_ALIGN_MODE), and ALIGN_ENDPOINTS_MODE's one sample in the middle.
    func testResizeBilinearGivesCoreMLsValues() throws {
        func resize(_ mode: SamplingMode, _ x: [Double], to width: Int) throws -> [Double] {
            try forward(.resizeBilinear(ResizeSpec(height: 1, width: width, mode: mode)), x, [1, 1, 1, x.count])
        }
        assertClose(try resize(.strictAlignEndpoints, [0, 1], to: 5), [0, 0.25, 0.5, 0.75, 1], "STRICT_ALIGN_ENDPOINTS_MODE")
        assertClose(try resize(.upsample, [0, 1], to: 5), [0, 0.4, 0.8, 1, 1], "UPSAMPLE_MODE")
        assertClose(try resize(.roiAlign, [0, 1], to: 5), [0.1, 0.3, 0.5, 0.7, 0.9], "ROI_ALIGN_MODE")
        assertClose(try resize(.alignEndpoints, [0, 1], to: 5), [0, 0.25, 0.5, 0.75, 1], "ALIGN_ENDPOINTS_MODE")
        assertClose(try resize(.alignEndpoints, [0, 2, 4, 6], to: 1), [3], "ALIGN_ENDPOINTS_MODE, one sample: the middle")
        assertClose(try resize(.strictAlignEndpoints, [0, 2, 4, 6], to: 1), [0], "STRICT_ALIGN_ENDPOINTS_MODE, one sample: the start")
        // Down in ROI_ALIGN_MODE: spacing 3 / 2, samples at 0.75 and 2.25.
        assertClose(try resize(.roiAlign, [0, 2, 4, 6], to: 2), [1.5, 4.5], "ROI_ALIGN_MODE down")
    }

    func testResizeBilinearReadsWritesAndRefuses() throws {
        let input = FeatureDescription(name: "x", type: .multiArray(.init(shape: [2, 3, 4], dataType: .float32)))
        func build(_ params: ResizeBilinearLayerParams) throws -> CoreMLModel {
            var b = try ModelBuilder(input: input)
            try b.add(LayerSpec(name: "resize", inputs: ["x"], outputs: ["y"], params: .resampling(.resizeBilinear(params))))
            return try b.build()
        }
        // No SamplingMode message: STRICT_ALIGN_ENDPOINTS_MODE, and written back without one.
        let bare = try build(ResizeBilinearLayerParams(targetSize: [5, 2], samplingMethod: nil))
        let reread = try CoreMLModel(serializedBytes: bare.serializedBytes())
        XCTAssertEqual(reread.layer(named: "resize")?.params, .resampling(.resizeBilinear(ResizeBilinearLayerParams(targetSize: [5, 2], samplingMethod: nil))))
        let layer = try XCTUnwrap(try NetworkGraph(model: reread).layer(named: "resize"))
        XCTAssertEqual(layer.outputShape, [1, 2, 5, 2])
        XCTAssertEqual(layer.op, .spatial(.resampling(.resizeBilinear(ResizeSpec(height: 5, width: 2, mode: .strictAlignEndpoints)))))
        // Default target size [1, 1]; an explicit mode 0 keeps its (empty) message.
        let unset = try XCTUnwrap(try NetworkGraph(model: build(ResizeBilinearLayerParams(targetSize: [], samplingMethod: 0))).layer(named: "resize"))
        XCTAssertEqual(unset.outputShape, [1, 2, 1, 1])
        XCTAssertEqual(ResizeBilinearLayerParams(targetSize: [], samplingMethod: 0).encodedBytes, [0x12, 0x00])

        func error(_ params: ResizeBilinearLayerParams) throws -> String {
            do { _ = try build(params) } catch let e as UpdraftError { return "\(e.message) \(e.hint ?? "")" }
            XCTFail("\(params) was accepted")
            return ""
        }
        let zero = try error(ResizeBilinearLayerParams(targetSize: [0, 4], samplingMethod: 1))
        XCTAssertTrue(zero.contains("layer 'resize' (resizeBilinear)") && zero.contains("target size [0, 4] must be at least 1"), zero)
        let three = try error(ResizeBilinearLayerParams(targetSize: [2, 2, 2], samplingMethod: 1))
        XCTAssertTrue(three.contains("targetSize lists 3 values"), three)
        let mode = try error(ResizeBilinearLayerParams(targetSize: [2, 2], samplingMethod: 9))
        XCTAssertTrue(mode.contains("samplingMethod 9"), mode)
    }

    func testResizeBilinearFixture() throws {
        try assertFixture("resize_bilinear", layers: ["rStrict", "rAlign", "rUpsample", "rRoi"], types: ["resizeBilinear"])
    }

    // MARK: cropResize

    /// coremltools' test of Core ML's crop_resize (sampling ALIGN_CORNERS, i.e. ALIGN_ENDPOINTS_MODE) on
    /// 1...16 as 4x4: a box [1, 1, 2, 2] to 2x2, 4x4 and 1x1 (the box's middle), the normalized box
    /// [0, 0, 1/3, 1/3] with batch index 0, and the reversed box [2, 2, 1, 1].
    func testCropResizeGivesCoreMLsValues() throws {
        let x = (1...16).map(Double.init)
        func crop(_ box: [Float], _ size: Int, normalized: Bool = false) throws -> [Double] {
            let spec = CropResizeSpec(height: size, width: size, mode: .alignEndpoints, coordinates: .cornersHeightFirst,
                                      normalized: normalized, boxLength: box.count, boxes: [box])
            return try forward(.cropResize(spec), x, [1, 1, 4, 4])
        }
        assertClose(try crop([1, 1, 2, 2], 2), [6, 7, 10, 11], "2x2")
        assertClose(try crop([1, 1, 2, 2], 4), [6, 19.0 / 3, 20.0 / 3, 7, 22.0 / 3, 23.0 / 3, 8, 25.0 / 3,
                                                26.0 / 3, 9, 28.0 / 3, 29.0 / 3, 10, 31.0 / 3, 32.0 / 3, 11], "4x4")
        assertClose(try crop([1, 1, 2, 2], 1), [8.5], "1x1")
        assertClose(try crop([0, 0, 0, 1.0 / 3, 1.0 / 3], 2, normalized: true), [1, 2, 5, 6], "normalized, batch index 0")
        assertClose(try crop([2, 2, 1, 1], 2), [11, 10, 7, 6], "reversed")
    }

    /// Each example its own box; the other box layouts and the spatial scale land on the same window.
    func testCropResizeBoxLayoutsAndExamples() throws {
        let x = (0..<32).map(Double.init)  // two examples of 4x4
        func crop(_ coordinates: BoxCoordinates, _ boxes: [[Float]], scale: Float = 1) throws -> [Double] {
            let spec = CropResizeSpec(height: 2, width: 3, mode: .strictAlignEndpoints, coordinates: coordinates,
                                      spatialScale: scale, boxes: boxes)
            return try forward(.cropResize(spec), x, [2, 1, 4, 4])
        }
        // Rows 1...3, columns 0...2 of example 0; rows 0...2, columns 1...3 of example 1.
        let expected: [Double] = [4, 5, 6, 12, 13, 14, 17, 18, 19, 25, 26, 27]
        assertClose(try crop(.cornersHeightFirst, [[1, 0, 3, 2], [0, 1, 2, 3]]), expected, "corners, height first")
        assertClose(try crop(.cornersWidthFirst, [[0, 1, 2, 3], [1, 0, 3, 2]]), expected, "corners, width first")
        assertClose(try crop(.centerSizeHeightFirst, [[2, 1, 2, 2], [1, 2, 2, 2]]), expected, "centre and size, height first")
        assertClose(try crop(.centerSizeWidthFirst, [[2, 4, 4, 4], [4, 2, 4, 4]], scale: 0.5), expected, "width first, scaled")
        XCTAssertThrowsError(try SpatialOp.resampling(.cropResize(CropResizeSpec(height: 2, width: 2, mode: .roiAlign,
            coordinates: .cornersHeightFirst, boxLength: 5, boxes: [[1, 0, 0, 1, 1]]))).geometry(input: [1, 1, 4, 4])) { e in
            XCTAssertTrue("\(e)".contains("batch index 1.0") && "\(e)".contains("must be 0"), "\(e)")
        }
    }

    func testCropResizeReadsAndRefuses() throws {
        let input = FeatureDescription(name: "x", type: .multiArray(.init(shape: [2, 5, 6], dataType: .float32)))
        func params(size: [Int] = [3, 4], box: Int32? = 1, scale: Float = 1) -> LayerParams {
            .resampling(.cropResize(CropResizeLayerParams(targetSize: size, normalizedCoordinates: true, samplingMethod: 3,
                                                          boxMode: box, spatialScale: scale)))
        }
        func build(_ crop: LayerParams, boxes: LoadConstantLayerParams) throws -> ModelBuilder {
            var b = try ModelBuilder(input: input)
            try b.add(LayerSpec(name: "boxes", inputs: [], outputs: ["boxes"], params: .loadConstant(boxes)))
            try b.add(LayerSpec(name: "crop", inputs: ["x", "boxes"], outputs: ["crop"], params: crop))
            return b
        }
        let one = LoadConstantLayerParams(shape: [4, 1, 1], data: WeightParams(values: [0.1, 0.2, 0.6, 0.9]), isND: false)
        let model = try build(params(), boxes: one).build()
        let reread = try CoreMLModel(serializedBytes: model.serializedBytes())
        XCTAssertEqual(reread.layer(named: "crop")?.params, params())
        let graph = try NetworkGraph(model: reread)
        let crop = try XCTUnwrap(graph.layer(named: "crop"))
        XCTAssertEqual(crop.outputShape, [1, 2, 3, 4])
        XCTAssertEqual(crop.outputLogicalShape, LogicalShape([1, 1, 2, 3, 4], batchAxis: 1), "rank 5, as Core ML's")
        XCTAssertEqual(crop.op, .spatial(.resampling(.cropResize(CropResizeSpec(height: 3, width: 4, mode: .roiAlign,
                                                                                coordinates: .cornersWidthFirst, normalized: true)))))
        // The box is read when the layer runs, the same for every example of the batch.
        let executor = try Executor(training: .inference(graph: graph), optimizer: .sgd, backend: CPUBackend())
        let x = Tensor(shape: [2, 2, 5, 6], uniformIn: -1...1, seed: 4)
        let y = try executor.predict(x, blob: "crop")
        let spec = CropResizeSpec(height: 3, width: 4, mode: .roiAlign, coordinates: .cornersWidthFirst, normalized: true,
                                  boxes: [[0.1, 0.2, 0.6, 0.9], [0.1, 0.2, 0.6, 0.9]])
        let expected = try Reference.spatialForward(try SpatialOp.resampling(.cropResize(spec)).geometry(input: [2, 2, 5, 6]),
                                                    input: x.data.map(Double.init))
        XCTAssertLessThan(zip(y.data, expected).map { abs(Double($0) - $1) }.max()!, 1e-6)

        func error(_ crop: LayerParams, boxes: LoadConstantLayerParams = one) throws -> String {
            do { _ = try build(crop, boxes: boxes) } catch let e as UpdraftError { return "\(e.message) \(e.hint ?? "")" }
            XCTFail("\(crop) was accepted")
            return ""
        }
        let two = LoadConstantLayerParams(shape: [2, 1, 4, 1, 1], data: WeightParams(values: [0, 0, 1, 1, 0, 0, 1, 1]), isND: true)
        let several = try error(params(), boxes: two)
        XCTAssertTrue(several.contains("layer 'crop' (cropResize): reads 2 boxes") && several.contains("one cropResize layer per box"), several)
        let six = LoadConstantLayerParams(shape: [6, 1, 1], data: WeightParams(values: [0, 0, 1, 1, 0, 0]), isND: false)
        XCTAssertTrue(try error(params(), boxes: six).contains("one box of 4 values, or 5"))
        XCTAssertTrue(try error(params(box: 7)).contains("boxMode 7"))
        XCTAssertTrue(try error(params(scale: 0)).contains("spatialScale 0.0 must be positive"))
        XCTAssertTrue(try error(params(size: [0, 2])).contains("target size [0, 2]"))
        var b = try ModelBuilder(input: input)
        XCTAssertThrowsError(try b.add(LayerSpec(name: "crop", inputs: ["x"], outputs: ["crop"], params: params()))) { e in
            XCTAssertTrue("\(e)".contains("has 1 inputs; expected 2"), "\(e)")
        }

        // A batch index other than 0 is refused when the layer reads it.
        let indexed = LoadConstantLayerParams(shape: [5, 1, 1], data: WeightParams(values: [1, 0.1, 0.2, 0.6, 0.9]), isND: false)
        let wrongIndex = try NetworkGraph(model: build(params(), boxes: indexed).build())
        XCTAssertThrowsError(try Executor(training: .inference(graph: wrongIndex), optimizer: .sgd, backend: CPUBackend())
            .predict(x, blob: "crop")) { e in
            XCTAssertTrue("\(e)".contains("layer 'crop' (cropResize), boxes 'boxes'") && "\(e)".contains("batch index 1.0"), "\(e)")
        }
    }

    /// Boxes computed from a trained convolution would need a gradient cropResize does not give: the
    /// first training step says so.
    func testCropResizeRefusesToTrainItsBoxes() throws {
        var b = try ModelBuilder(input: FeatureDescription(name: "x", type: .multiArray(.init(shape: [2, 5, 6], dataType: .float32))), seed: 3)
        try b.convolution("conv", outputChannels: 2, kernel: (1, 1))
        try b.innerProduct("boxFc", input: "conv", outputChannels: 4)
        try b.add(LayerSpec(name: "crop", inputs: ["conv", "boxFc"], outputs: ["crop"],
                            params: .resampling(.cropResize(CropResizeLayerParams(targetSize: [2, 2], samplingMethod: 0, boxMode: 0,
                                                                                  spatialScale: 1)))))
        let model = try b.buildLayerTestClassifier()
        let examples = (0..<3).map { TrainingExample(input: Tensor(shape: [2, 5, 6], uniformIn: -1...1, seed: UInt64($0)), target: .classIndex($0)) }
        let run = try TrainingRun.train(model, try ArrayBatchProvider(examples: examples)) { $0.placement.backends = (CPUBackend(), CPUBackend()) }
        XCTAssertEqual(run.state, .failed)
        XCTAssertTrue("\(run.error.map { "\($0)" } ?? "")".contains("its boxes 'boxFc' come from trained layers"), "\(String(describing: run.error))")
    }

    func testCropResizeFixture() throws {
        try assertFixture("crop_resize", layers: ["cStrict", "cAlign", "cUpsample", "cRoi", "cReversed"], types: ["cropResize"])
    }

    // MARK: The fixtures

    static let folder = Fixtures.url("resample")

    /// The resample fixture `name` through `assertLayerFixture` (Support/LayerFixtureSupport.swift).
    func assertFixture(_ name: String, layers: [String], types: [String], file: StaticString = #filePath, line: UInt = #line) throws {
        _ = try assertLayerFixture(Self.folder, name, layers: layers, types: types, file: file, line: line)
    }
}

extension ResizeBilinearLayerParams {
    /// The parameter message's bytes as Updraft writes them.
    var encodedBytes: [UInt8] { LayerParams.resampling(.resizeBilinear(self)).encoded().serialized() }
}
