import Foundation
import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftChecks
@testable import UpdraftLayers
@testable import UpdraftModel
@testable import UpdraftData
@testable import UpdraftTraining

/// The reduce layers of the table in Ops/Reduce.swift: the models of Tests/Scripts/make_reduce_fixtures.py
/// (built with coremltools, their values computed with numpy) read, run forward to numpy's values on the
/// reference, the CPU and OpenCL, written back byte for byte and trained through; gradients of every
/// kind on the CPU and OpenCL against the reference (whose own gradients the gradcheck rows check);
/// products with zeros, a stable logSumExp, and argMax / argMin refused wherever a gradient is asked.
final class ReduceLayerTests: XCTestCase {
    static let folder = Fixtures.url("reduce")

    var backends: [Backend] {
        get throws { [ReferenceBackend(), CPUBackend(threads: 2), OpenCLBackend(context: try OpenCLTestSupport.context())] }
    }

    // MARK: The fixtures

    func testNDReduceLayersFixture() throws {
        try assertLayerFixture(Self.folder, "reduce_nd", layers: ["rL1", "rL2", "rMin", "rProd", "rLogSum", "rSumSquare", "rLogSumExp"],
                               types: ["reduceL1", "reduceL2", "reduceMin", "reduceProd", "reduceLogSum", "reduceSumSquare", "reduceLogSumExp"])
    }

    func testOldReduceLayerModesFixture() throws {
        let (model, _) = try assertLayerFixture(Self.folder, "reduce_old", layers: ["oProd", "oLogSum", "oSumSquare", "oL1", "oL2", "oMin"],
                                                types: ["reduce"])
        // LOGSUM carries the layer's epsilon into the geometry.
        let graph = try NetworkGraph(model: model)
        let logSum = try XCTUnwrap(try graph.layer(named: "oLogSum")?.reductionGeometry(batch: 2))
        XCTAssertEqual(logSum.kind, .logSum)
        XCTAssertEqual(logSum.offset, Double(Float(1e-6)))
    }

    /// argMax, argMin and ARGMAX run forward to numpy's positions on every backend; training through
    /// them is refused, naming the layer.
    func testArgMaxAndArgMinFixtureRunsForwardAndRefusesTraining() throws {
        let (model, fixture) = try assertLayerFixture(Self.folder, "reduce_arg", layers: ["aMax", "aMin", "oArgMax"],
                                                      types: ["argMax", "argMin", "reduce"], trains: false)
        let graph = try NetworkGraph(model: model)
        XCTAssertFalse(try XCTUnwrap(graph.layer(named: "aMax")).op.hasGradient)
        XCTAssertTrue(try XCTUnwrap(graph.layer(named: "mix")).op.hasGradient)
        XCTAssertThrowsError(try TrainingGraph(graph: graph)) { e in
            let text = "\(e)"
            XCTAssertTrue(text.contains("'aMax' (reduce(argMax))") && text.contains("has no gradient"), text)
        }
        // The validator says so before training: an error, not Core ML's "Updraft can still train it" warning.
        let findings = ModelValidator.validate(model)
        XCTAssertEqual(findings.errors.map(\.message), ["layer 'mix' cannot be updated: the gradient from loss 'loss' passes through argMax layer 'aMax', which has no gradient"])
        XCTAssertFalse(findings.contains { $0.message.contains("Updraft can still train it") }, "\(findings)")
        let run = try TrainingRun.train(model, try ArrayBatchProvider(examples: fixture.examples)) { $0.placement.backends = (CPUBackend(), CPUBackend()) }
        XCTAssertEqual(run.state, .failed)
        XCTAssertTrue("\(run.error.map { "\($0)" } ?? "")".contains("has no gradient"), "\(String(describing: run.error))")
    }

    // MARK: Gradients on the backends

    /// Every kind's forward and (where it has one) backward on the CPU and OpenCL, against the Double
    /// reference, over the full comparison list; every kind of the table is covered.
    func testEveryKindMatchesTheReferenceOnTheBackends() throws {
        for backend in try backends.dropFirst() {
            let rows = BackendComparison(backend: backend).run(.full, only: "reduce")
            let failures = rows.filter { !$0.ok }
            XCTAssertTrue(failures.isEmpty, "\(backend.name)\n" + ComparisonRow.table(failures))
            let kinds = Set([OpCase].full.filter { $0.matches("reduce") }.compactMap { c -> ReductionKind? in
                c.subject(as: ReductionCase.self)?.geometry.kind
            })
            XCTAssertEqual(kinds, Set(ReductionKind.allCases))
            XCTAssertEqual(Set(rows.filter { $0.caseName.hasPrefix("argMax") }.map(\.quantity)), ["y"], "argMax is forward only")
            XCTAssertTrue(rows.contains { $0.caseName.hasPrefix("prod") && $0.quantity == "dx" })
        }
        // The reference's own gradients: one finite-difference row per case of every kind with a gradient.
        let checked = GradientCheck.run(.gradientCheck, only: "reduce")
        XCTAssertTrue(checked.allSatisfy(\.ok), ComparisonRow.table(checked.filter { !$0.ok }))
        for kind in ReductionKind.allCases where kind.hasGradient {
            XCTAssertTrue(checked.contains { $0.caseName.hasPrefix(kind == .sum ? "sum" : kind.rawValue + " ") }, "\(kind) has gradcheck rows")
        }
    }

    /// A product's gradient is the product of the others, also with zeros: one zero gets the product
    /// of the rest, two zeros give 0 everywhere.
    func testProductGradientWithZeros() throws {
        let g = ReductionGeometry(kind: .prod, inputDims: [3, 4], outputDims: [3, 1])
        let x: [Float] = [2, 3, 4, 5, 2, 0, 3, 4, 0, 2, 0, 3]
        let dy: [Float] = [1, 0.5, 2]
        let y: [Float] = [120, 0, 0]
        let dx: [Float] = [60, 40, 30, 24, 0, 12, 0, 0, 0, 0, 0, 0]
        for backend in try backends {
            let xb = try backend.makeBuffer(x), yb = try backend.makeBuffer(count: 3), dxb = try backend.makeBuffer(count: 12)
            try backend.reduce(g, input: xb, output: yb)
            XCTAssertEqual(try backend.download(yb), y, backend.name)
            try backend.reduceBackward(g, input: xb, outputGradient: try backend.makeBuffer(dy), inputGradient: dxb)
            XCTAssertEqual(try backend.download(dxb), dx, backend.name)
        }
        XCTAssertEqual(try Reference.reduceBackward(g, input: x.map(Double.init), outputGradient: dy.map(Double.init)), dx.map(Double.init))
    }

    /// logSumExp shifts by the maximum: inputs near 1000 (exp overflows float) give 1000 + log(sum exp(x - 1000)).
    func testLogSumExpIsStableForLargeInputs() throws {
        let g = ReductionGeometry(kind: .logSumExp, inputDims: [1, 3], outputDims: [1, 1])
        let expected = 1000 + Foundation.log(2 + Foundation.exp(-1.0))
        for backend in try backends {
            let y = try backend.makeBuffer(count: 1), dx = try backend.makeBuffer(count: 3)
            let xb = try backend.makeBuffer([1000, 999, 1000])
            try backend.reduce(g, input: xb, output: y)
            XCTAssertEqual(Double(try backend.download(y)[0]), expected, accuracy: 1e-3, backend.name)
            try backend.reduceBackward(g, input: xb, outputGradient: try backend.makeBuffer([1]), inputGradient: dx)
            let softmax = [1, Foundation.exp(-1.0), 1].map { $0 / (2 + Foundation.exp(-1.0)) }
            for (a, b) in zip(try backend.download(dx), softmax) { XCTAssertEqual(Double(a), b, accuracy: 1e-5, backend.name) }
        }
    }

    /// The L2 norm of zeros has gradient 0, not NaN.
    func testL2GradientAtZeroIsZero() throws {
        let g = ReductionGeometry(kind: .l2, inputDims: [2, 2], outputDims: [2, 1])
        for backend in try backends {
            let dx = try backend.makeBuffer(count: 4)
            try backend.reduceBackward(g, input: try backend.makeBuffer([0, 0, 3, 4]), outputGradient: try backend.makeBuffer([1, 1]), inputGradient: dx)
            XCTAssertEqual(try backend.download(dx), [0, 0, 0.6, 0.8], backend.name)
        }
    }

    /// Asking any backend for an index's gradient fails with the kind's name and the way out.
    func testArgMaxBackwardIsRefusedOnEveryBackend() throws {
        let g = ReductionGeometry(kind: .argMax, inputDims: [2, 3], outputDims: [2, 1])
        for backend in try backends {
            let x = try backend.makeBuffer([1, 3, 2, 5, 4, 5]), y = try backend.makeBuffer(count: 2)
            try backend.reduce(g, input: x, output: y)
            XCTAssertEqual(try backend.download(y), [1, 0], "\(backend.name): the first maximum's position")
            XCTAssertThrowsError(try backend.reduceBackward(g, input: x, outputGradient: try backend.makeBuffer([1, 1]),
                                                            inputGradient: try backend.makeBuffer(count: 6))) { e in
                let error = e as? UpdraftError
                XCTAssertEqual(error?.message, "argMax reduction has no gradient", backend.name)
                XCTAssertTrue(error?.hint?.contains("train only layers after it") == true, backend.name)
            }
        }
    }

    // MARK: Shapes and refusals

    func testReduceLayerArgMaxTakesOneAxisOnly() throws {
        let input = FeatureDescription(name: "x", type: .multiArray(.init(shape: [2, 3, 4], dataType: .float32)))
        var b = try ModelBuilder(input: input)
        XCTAssertThrowsError(try b.add(LayerSpec(name: "bad", inputs: ["x"], outputs: ["y"], params: .reduce(ReduceLayerParams(mode: 9, axis: 1))))) { e in
            let text = "\((e as? UpdraftError)?.message ?? "") \((e as? UpdraftError)?.hint ?? "")"
            XCTAssertTrue(text.contains("layer 'bad' (reduce): ARGMAX over several axes is not defined") && text.contains("C, H or W"), text)
        }
        // ArgMaxLayerParams: axis -1 and removeDim read into the shared fields and written back as they were.
        let arg = ReduceNDLayerParams(kind: .argMax, axes: [-1], keepDims: false)
        try b.add(LayerSpec(name: "arg", inputs: ["x"], outputs: ["y"], params: .reduceND(arg)))
        let model = try b.build()
        let reread = try CoreMLModel(serializedBytes: model.serializedBytes())
        XCTAssertEqual(reread.layer(named: "arg")?.params, .reduceND(arg))
        XCTAssertEqual(reread.layer(named: "arg")?.typeName, "argMax")
        let layer = try XCTUnwrap(try NetworkGraph(model: reread).layer(named: "arg"))
        XCTAssertEqual(layer.outputLogicalShape.dims, [2, 3])
        XCTAssertEqual(layer.op, .reduce(ReductionSpec(mode: .argMax, input: [2, 3, 4], output: [2, 3, 1])))
    }
}
