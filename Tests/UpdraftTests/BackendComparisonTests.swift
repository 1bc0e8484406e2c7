import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

final class BackendComparisonTests: XCTestCase {
    func testReferenceBackendMatchesReferenceOnQuickCases() {
        let rows = BackendComparison(backend: ReferenceBackend()).run(.quick)
        let failures = rows.filter { !$0.ok }
        XCTAssertTrue(failures.isEmpty, "\n" + ComparisonRow.table(failures))
        // every op of the Backend protocol is exercised, each with all its quantities
        XCTAssertEqual(Set(rows.map(\.op)), Set([OpCase].quick.map(\.op)))
        XCTAssertEqual(Set(rows.filter { $0.op == "convolution" }.map(\.quantity)), ["y", "dx", "dw", "db"])
        XCTAssertEqual(Set(rows.filter { $0.op == "softmaxCrossEntropy" }.map(\.quantity)), ["loss", "dz", "correct", "loss alone"])
        XCTAssertEqual(Set(rows.filter { $0.op == "memory" }.map(\.quantity)), ["upload/download", "fill", "copy", "accumulate"])
    }

    /// The full list is valid (every geometry resolves, every case runs) and cheap enough for the reference.
    func testFullCasesRunOnTheReferenceBackend() {
        let rows = BackendComparison(backend: ReferenceBackend()).run(.full)
        let failures = rows.filter { !$0.ok }
        XCTAssertTrue(failures.isEmpty, "\n" + ComparisonRow.table(failures))
        XCTAssertFalse(rows.contains { $0.quantity == "error" })
    }

    func testCaseNamesAreUniqueAndTheListsCoverTheAwkwardSizes() {
        for list in [[OpCase].quick, .full, .gradientCheck] {
            XCTAssertEqual(Set(list.map(\.description)).count, list.count, "duplicate case names")
        }
        let full = [OpCase].full
        var channels = Set<Int>(), spatial = Set<Int>(), batches = Set<Int>()
        for c in full {
            if let conv = c.subject(as: ConvolutionCase.self) {
                let (spec, input) = (conv.spec, conv.input)
                channels.formUnion([input.c, spec.outputChannels]); spatial.formUnion([input.h, input.w]); batches.insert(input.n)
            }
        }
        XCTAssertTrue(Set([1, 7, 31, 32, 33, 63, 65]).isSubset(of: channels), "\(channels.sorted())")
        XCTAssertTrue(Set([1, 7, 31, 32, 33, 63, 65]).isSubset(of: spatial), "\(spatial.sorted())")
        XCTAssertEqual(batches, [1, 3])
    }

    func testFilterRunsOnlyMatchingOps() {
        let rows = BackendComparison(backend: ReferenceBackend()).run(.quick, only: "Conv")
        XCTAssertFalse(rows.isEmpty)
        XCTAssertTrue(rows.allSatisfy { $0.op == "convolution" })
        XCTAssertEqual([OpCase].full.matching("sgd").count, 2)
    }

    /// Each fault in a wrapped reference backend is caught in its own rows, and nowhere else.
    func testPerturbedBackendIsCaught() {
        let expectations: [(FaultyBackend.Fault, op: String, quantity: String)] = [
            (.poolingGradient, "pooling", "dx"),
            (.accumulatingConvolution, "convolution", "y"),
            (.throwingSoftmax, "softmax", "error"),
            (.correctCountOffByOne, "softmaxCrossEntropy", "correct"),
            (.adamWithoutBiasCorrection, "adam", "w"),
            (.copyTouchesTheTail, "memory", "copy"),
        ]
        for (fault, op, quantity) in expectations {
            let rows = BackendComparison(backend: FaultyBackend(fault)).run(.quick)
            let failures = rows.filter { !$0.ok }
            XCTAssertFalse(failures.isEmpty, "\(fault) was not caught")
            XCTAssertTrue(failures.allSatisfy { $0.op == op }, "\(fault):\n" + ComparisonRow.table(failures))
            XCTAssertTrue(failures.contains { $0.quantity == quantity }, "\(fault):\n" + ComparisonRow.table(failures))
        }
    }

    // MARK: ReferenceBackend's own checks

    func testReferenceBackendRejectsForeignAndShortBuffers() throws {
        let backend = ReferenceBackend()
        let g = try ConvolutionSpec(inputChannels: 1, outputChannels: 1, kernelH: 3, kernelW: 3).geometry(input: [1, 1, 4, 4])
        let x = try backend.makeBuffer(count: 16), w = try backend.makeBuffer(count: 9), b = try backend.makeBuffer(count: 1)
        XCTAssertThrowsError(try backend.convolutionForward(g, input: x, weights: w, bias: b, output: ForeignBuffer(), fusedReLU: false)) {
            XCTAssertTrue("\($0)".contains("not a host buffer"), "\($0)")
        }
        XCTAssertThrowsError(try backend.convolutionForward(g, input: x, weights: try backend.makeBuffer(count: 8), bias: b,
                                                            output: try backend.makeBuffer(count: 4), fusedReLU: false)) {
            XCTAssertTrue("\($0)".contains("convolution weights holds 8 values, the op needs 9"), "\($0)")
        }
        XCTAssertThrowsError(try backend.convolutionForward(g, input: x, weights: w, bias: nil,
                                                            output: try backend.makeBuffer(count: 4), fusedReLU: false))
        XCTAssertThrowsError(try backend.upload([1, 2, 3], to: x))
        XCTAssertThrowsError(try backend.makeBuffer(count: -1))
        XCTAssertThrowsError(try backend.activationForward(.relu, input: x, output: x, count: 17))
        // a larger output buffer is fine: elements past the op's are left alone
        let big = try backend.makeBuffer([Float](repeating: 9, count: 6))
        try backend.convolutionForward(g, input: x, weights: w, bias: b, output: big, fusedReLU: false)
        XCTAssertEqual(try backend.download(big), [0, 0, 0, 0, 9, 9])
    }

    func testReferenceBackendRunsInPlace() throws {
        let backend = ReferenceBackend()
        let x = try backend.makeBuffer([-1, 2, -3])
        try backend.activationForward(.relu, input: x, output: x, count: 3)
        XCTAssertEqual(try backend.download(x), [0, 2, 0])
    }
}

/// A buffer no CPU backend owns.
final class ForeignBuffer: DeviceBuffer {
    var count: Int { 4 }
}

/// The reference backend with one deliberate bug, to show the comparison catches it.
final class FaultyBackend: Backend {
    enum Fault { case poolingGradient, accumulatingConvolution, throwingSoftmax, correctCountOffByOne,
                      adamWithoutBiasCorrection, copyTouchesTheTail }
    let fault: Fault
    let base = ReferenceBackend()
    init(_ fault: Fault) { self.fault = fault }
    var name: String { "faulty" }

    /// Adds `delta` to element `index` of a buffer.
    func nudge(_ buffer: DeviceBuffer, _ index: Int, by delta: Float) throws {
        var values = try base.download(buffer)
        values[index] += delta
        try base.upload(values, to: buffer)
    }

    func makeBuffer(count: Int) throws -> DeviceBuffer { try base.makeBuffer(count: count) }
    func upload(_ values: [Float], to buffer: DeviceBuffer) throws { try base.upload(values, to: buffer) }
    func download(_ buffer: DeviceBuffer) throws -> [Float] { try base.download(buffer) }
    func fill(_ buffer: DeviceBuffer, with value: Float) throws { try base.fill(buffer, with: value) }
    func copy(_ source: DeviceBuffer, to destination: DeviceBuffer) throws {
        try base.copy(source, to: destination)
        if fault == .copyTouchesTheTail, destination.count > source.count { try nudge(destination, source.count, by: 1) }
    }
    func accumulate(_ source: DeviceBuffer, into destination: DeviceBuffer) throws { try base.accumulate(source, into: destination) }
    func synchronize() throws {}

    /// Every op runs on the reference, except the faulty one.
    func run<Op: DeviceOp>(_ op: Op) throws -> Op.Result {
        switch (fault, op) {
        case let (.accumulatingConvolution, c as DeviceOps.ConvolutionForward):
            let scratch = try base.makeBuffer(count: c.output.count)
            try base.convolutionForward(c.g, input: c.input, weights: c.weights, bias: c.bias, output: scratch, epilogue: c.epilogue)
            try base.accumulate(scratch, into: c.output)  // the bug: += instead of =
            return () as! Op.Result
        case (.throwingSoftmax, is DeviceOps.SoftmaxForward):
            throw UpdraftError(.device, "softmax kernel failed to build")
        case let (.adamWithoutBiasCorrection, a as DeviceOps.AdamStep):
            // the bug: always the first step's bias correction
            try base.adamStep(a.h, step: 1, parameter: a.parameter, gradient: a.gradient, m: a.m, v: a.v, count: a.count)
            return () as! Op.Result
        default:
            break
        }
        let result = try op.run(on: base)
        switch (fault, op) {
        case let (.poolingGradient, p as DeviceOps.PoolingBackward):
            try nudge(p.inputGradient, p.inputGradient.count - 1, by: 0.01)
        case let (.correctCountOffByOne, s as DeviceOps.SoftmaxCrossEntropy):
            if let correct = s.correct { try nudge(correct, 0, by: 1) }
        default:
            break
        }
        return result
    }
}
