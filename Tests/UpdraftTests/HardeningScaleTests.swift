import XCTest
import Updraft

/// Issue 13, finding 9: inspecting, building and training a long chain is linear in its length.
/// Before, a 20,000-layer chain took 53 s to inspect and 29 s to train one epoch (debug build);
/// linear, both take about a second. The bounds are generous for a slow shared machine; the
/// figures are `updraft-bench chain`'s.
final class HardeningScaleTests: XCTestCase {
    func testLongChainIsLinear() throws {
        let model = try ChainModel.make(reLUs: 20_000)
        let reread = try CoreMLModel(serializedData: model.serializedData())
        var start = Date()
        let report = ModelReport(model: reread)
        XCTAssertEqual(report.layers.count, 20_003)
        XCTAssertTrue(report.findings.filter { $0.severity == "error" }.isEmpty, "\(report.findings)")
        let inspect = Date().timeIntervalSince(start)
        XCTAssertLessThan(inspect, 15, "inspect of 20,000 layers")

        start = Date()
        let examples = (0..<8).map { TrainingExample(input: Tensor(shape: [8, 1, 1], uniformIn: -1...1, seed: UInt64($0)), target: .classIndex($0 % 3)) }
        var config = UpdateConfiguration()
        let cpu = CPUBackend()
        config.placement.backends = (cpu, cpu)
        let context = UpdateTask(model: reread, trainingData: try ArrayBatchProvider(examples: examples), configuration: config).run()
        XCTAssertEqual(context.task.state, .completed, "\(context.error.map { "\($0)" } ?? "")")
        XCTAssertLessThan(Date().timeIntervalSince(start), 15, "one epoch of a 20,000-layer chain")
    }
}
