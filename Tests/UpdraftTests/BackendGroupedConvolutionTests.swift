import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends

/// The depthwise and grouped convolution fast paths (CPU and OpenCL) against the Double reference,
/// forward and both gradients, on `[OpCase].groupedConvolution`'s awkward sizes.
final class BackendGroupedConvolutionTests: XCTestCase {
    private func assertMatchesReference(_ backend: Backend, _ label: String, seed: UInt64 = 0,
                                        file: StaticString = #filePath, line: UInt = #line) {
        let cases = [OpCase].groupedConvolution
        let rows = BackendComparison(backend: backend, seed: seed).run(cases)
        let failures = rows.filter { !$0.ok }
        XCTAssertTrue(failures.isEmpty, "\(label):\n" + ComparisonRow.table(failures), file: file, line: line)
        // Forward, backward data and backward weights of every case.
        XCTAssertGreaterThanOrEqual(rows.count, 3 * cases.count, "\(label): every direction compared", file: file, line: line)
    }

    func testTheListTakesTheDirectPathWhereItShould() {
        let cpu = CPUBackend()
        let geometries = [OpCase].groupedConvolution.compactMap { c -> ConvGeometry? in
            guard let conv = c.subject(as: ConvolutionCase.self) else { return nil }
            return try? conv.spec.geometry(input: conv.input)
        }
        XCTAssertEqual(geometries.count, [OpCase].groupedConvolution.count)
        XCTAssertEqual(geometries.filter { cpu.usesGroupedDirect($0) }.count, geometries.count - 1)
        XCTAssertTrue(geometries.contains { $0.inChannels == $0.groups && $0.outChannels > $0.groups }, "a multiplier above 1")
    }

    func testCPUMatchesReference() {
        for threads in [1, 3] {
            for schedule in [CPUConvolutionSchedule.gemmThreads, .imageThreads] {
                let backend = CPUBackend(threads: threads)
                backend.convolutionScheduleOverride = schedule
                assertMatchesReference(backend, "cpu, \(threads) threads, \(schedule)")
            }
        }
        assertMatchesReference(CPUBackend(), "cpu, another seed", seed: 777)
    }

    /// The result does not depend on the thread count (each weight gradient is summed by one thread).
    func testCPUWeightGradientIsTheSameForEveryThreadCount() throws {
        let spec = ConvolutionSpec(inputChannels: 12, outputChannels: 24, kernelH: 3, kernelW: 3, strideH: 2, strideW: 2,
                                   groups: 12, padding: .valid(top: 1, bottom: 1, left: 1, right: 1))
        let g = try spec.geometry(input: [5, 12, 21, 19])
        var results: [[Float]] = []
        for threads in [1, 2, 3] {
            let cpu = CPUBackend(threads: threads)
            let x = try cpu.makeBuffer(Tensor(shape: g.inputShape, uniformIn: -1...1, seed: 3))
            let dy = try cpu.makeBuffer(Tensor(shape: g.outputShape, uniformIn: -1...1, seed: 4))
            let dw = try cpu.makeBuffer(count: g.weightShape.count)
            let db = try cpu.makeBuffer(count: g.outChannels)
            try cpu.convolutionBackwardWeights(g, input: x, outputGradient: dy, weightGradient: dw, biasGradient: db)
            results.append(try cpu.download(dw))
        }
        XCTAssertEqual(results[0], results[1])
        XCTAssertEqual(results[0], results[2])
    }

    func testOpenCLMatchesReference() throws {
        let backend = OpenCLBackend(context: try OpenCLTestSupport.context())
        assertMatchesReference(backend, "opencl")
    }
}
