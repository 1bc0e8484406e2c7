import XCTest
@testable import UpdraftCore
@testable import UpdraftModel
@testable import UpdraftLayers
@testable import UpdraftPlacement

/// Devices described by hand (no hardware needed), shared by the scheduling tests.
enum DescribedDevices {
    static let gib: UInt64 = 1 << 30
    /// A big discrete GPU: 10 TFLOP/s, 500 GB/s, 10 µs launches, 12 GB/s PCIe with 20 µs per copy.
    static let fastGPU = DeviceProfile(name: "Fast GPU", kind: .gpu, openCLIndex: 0, fmaGFLOPS: 10_000, bandwidthGBps: 500,
                                       launchLatencyMicroseconds: 10, memoryBytes: 16 * gib, transferGBps: 12,
                                       transferLatencyMicroseconds: 20, matrixEfficiency: 0.5)
    /// A weak integrated GPU: slower at convolutions than the CPU below.
    static let slowGPU = DeviceProfile(name: "Slow GPU", kind: .gpu, openCLIndex: 1, fmaGFLOPS: 40, bandwidthGBps: 20,
                                       launchLatencyMicroseconds: 30, memoryBytes: 2 * gib, transferGBps: 4,
                                       transferLatencyMicroseconds: 40, matrixEfficiency: 0.5)
    /// An OpenCL CPU device (like PoCL): fast, but only `all` may use it.
    static let openCLCPU = DeviceProfile(name: "pthread-cpu", kind: .cpu, openCLIndex: 2, fmaGFLOPS: 400, bandwidthGBps: 40,
                                         launchLatencyMicroseconds: 5, memoryBytes: 8 * gib, transferGBps: 20,
                                         transferLatencyMicroseconds: 5, matrixEfficiency: 0.5)
    /// An accelerator that multiplies fast but pays 200 µs for every launch and copy.
    static let farAccelerator = DeviceProfile(name: "Far Accelerator", kind: .accelerator, openCLIndex: 3, fmaGFLOPS: 10_000,
                                              bandwidthGBps: 500, launchLatencyMicroseconds: 200, memoryBytes: 16 * gib,
                                              transferGBps: 12, transferLatencyMicroseconds: 200, matrixEfficiency: 0.5)
    /// The host CPU backend: 50 GFLOP/s, 10 GB/s, 1 µs per op.
    static let cpu = DeviceProfile(name: "Host CPU", kind: .cpu, openCLIndex: nil, fmaGFLOPS: 50, bandwidthGBps: 10,
                                   launchLatencyMicroseconds: 1, memoryBytes: 32 * gib, transferGBps: 10)
}

/// Graphs the scheduling tests plan.
enum SchedulingGraphs {
    /// Built once: SqueezeNet takes a moment to generate in a debug build.
    static func squeezeNet() throws -> NetworkGraph { try squeezeNetGraph.get() }
    private static let squeezeNetGraph = Result { try NetworkGraph(model: SqueezeNet.build(.init(classes: 10))) }

    /// A small dense classifier (fixture): a workload where launch latency is everything.
    static func dense() throws -> NetworkGraph {
        try NetworkGraph(model: CoreMLModel(contentsOf: Fixtures.url("dense_sgd_classifier.mlmodel")))
    }

    /// A 3x3 convolution 3 -> 64 on 112x112, ReLU, global average pool (the frozen prefix), then an
    /// updatable 64 -> 10 inner product and softmax: heavy prefix, tiny tail, small boundary.
    static func convThenDense() throws -> NetworkGraph {
        let image = ImageFeatureType(width: 112, height: 112, colorSpace: .rgb)
        var b = try ModelBuilder(input: FeatureDescription(name: "image", type: .image(image)), seed: 1)
        try b.convolution("conv", outputChannels: 64, kernel: (3, 3), padding: .valid(top: 1, bottom: 1, left: 1, right: 1))
        try b.activation("relu", .relu)
        try b.globalPoolClassifierHead(pool: "gap", dense: "fc", labels: .numbered(10))
        try b.makeUpdatable(["fc"])
        try b.setCrossEntropyLoss(input: "probabilities")
        b.setOptimizer(.sgd(learningRate: 0.01, miniBatchSize: 8))
        return try NetworkGraph(model: b.build())
    }
}

final class SchedulingPlanTests: XCTestCase {
    typealias D = DescribedDevices

    func testBigBatchGoesToTheFastGPUWithoutSplitting() throws {
        let plan = try Scheduler.plan(graph: try SchedulingGraphs.squeezeNet(), batchSize: 64, computeUnits: .all,
                                      devices: [D.cpu, D.slowGPU, D.fastGPU])
        XCTAssertEqual(plan.prefixDevice, D.fastGPU)
        XCTAssertEqual(plan.tailDevice, D.fastGPU)
        XCTAssertFalse(plan.isSplit)
        XCTAssertTrue(plan.layers.allSatisfy { $0.device == "opencl:0" })
        // The batch goes up to the GPU; no tensor crosses between prefix and tail.
        XCTAssertTrue(plan.transfers.contains { $0.from == "host" && $0.to == "opencl:0" && $0.bytes == 64 * 3 * 227 * 227 * 4 })
        XCTAssertFalse(plan.transfers.contains { $0.what.contains("prefix to tail") })
        // Every split was weighed and lost: the boundary (fire9's 25 MB output) costs more than it saves.
        XCTAssertTrue(plan.candidates.contains { $0.isSplit })
    }

    func testTinyWorkloadStaysOnTheCPU() throws {
        let plan = try Scheduler.plan(graph: try SchedulingGraphs.dense(), batchSize: 1, computeUnits: .all,
                                      devices: [D.fastGPU, D.cpu])
        XCTAssertEqual(plan.tailDevice, D.cpu)
        XCTAssertEqual(plan.prefixDevice, D.cpu)
        XCTAssertTrue(plan.transfers.isEmpty, "\(plan.transfers)")
        // The GPU lost on launch and copy latency, not on arithmetic.
        let gpu = try XCTUnwrap(plan.candidates.first { $0.prefixDevice == "opencl:0" && $0.tailDevice == "opencl:0" })
        XCTAssertGreaterThan(gpu.totalMs, plan.totalMs)
    }

    func testSlowGPULosesToTheCPUAndTheFastGPUWinsOverBoth() throws {
        let graph = try SchedulingGraphs.squeezeNet()
        let slow = try Scheduler.plan(graph: graph, batchSize: 32, computeUnits: .cpuAndGPU, devices: [D.cpu, D.slowGPU])
        XCTAssertEqual(slow.devices, [D.cpu])
        let both = try Scheduler.plan(graph: graph, batchSize: 32, computeUnits: .cpuAndGPU, devices: [D.slowGPU, D.cpu, D.fastGPU])
        XCTAssertEqual(both.devices, [D.fastGPU])
    }

    func testSplitOnlyWhenItPays() throws {
        let graph = try SchedulingGraphs.convThenDense()
        // The far accelerator runs the heavy convolution; the tiny tail would pay 200 µs per launch
        // there, so it goes to the CPU, and only the 2 KiB pooled features cross.
        let split = try Scheduler.plan(graph: graph, batchSize: 8, computeUnits: .all, devices: [D.cpu, D.farAccelerator])
        XCTAssertTrue(split.isSplit)
        XCTAssertEqual(split.prefixDevice, D.farAccelerator)
        XCTAssertEqual(split.tailDevice, D.cpu)
        let boundary = try XCTUnwrap(split.transfers.first { $0.what.contains("prefix to tail") })
        XCTAssertEqual(boundary.bytes, 8 * 64 * 4)
        XCTAssertEqual(boundary.from, "opencl:3")
        XCTAssertEqual(boundary.to, "host")
        let single = try XCTUnwrap(split.candidates.filter { !$0.isSplit }.map(\.totalMs).min())
        XCTAssertLessThan(split.totalMs, single * 0.9)
        XCTAssertEqual(split.layers.filter { $0.segment == .prefix }.map(\.device), ["opencl:3", "opencl:3", "opencl:3", "opencl:3"])

        // Demanding a larger gain than the split offers keeps the model on one device.
        let gain = 1 - split.totalMs / single
        let kept = try Scheduler.plan(graph: graph, batchSize: 8, computeUnits: .all, devices: [D.cpu, D.farAccelerator],
                                      options: .init(minimumSplitGain: gain + 0.01))
        XCTAssertFalse(kept.isSplit)
        XCTAssertEqual(kept.totalMs, single, accuracy: 1e-9)
    }

    func testCPUOnlyNeverPicksOpenCL() throws {
        for graph in [try SchedulingGraphs.squeezeNet(), try SchedulingGraphs.convThenDense()] {
            let plan = try Scheduler.plan(graph: graph, batchSize: 64, computeUnits: .cpuOnly,
                                          devices: [D.fastGPU, D.openCLCPU, D.farAccelerator, D.cpu])
            XCTAssertEqual(plan.devices, [D.cpu])
            XCTAssertTrue(plan.candidates.allSatisfy { $0.prefixDevice == "cpu" && $0.tailDevice == "cpu" })
            XCTAssertTrue(plan.transfers.isEmpty)
        }
        XCTAssertThrowsError(try Scheduler.plan(graph: try SchedulingGraphs.dense(), batchSize: 1, computeUnits: .cpuOnly,
                                                devices: [D.fastGPU])) { error in
            XCTAssertTrue("\(error)".contains("cpuOnly"), "\(error)")
        }
    }

    func testComputeUnitsDecideWhichOpenCLDevicesCount() throws {
        let graph = try SchedulingGraphs.squeezeNet()
        // The OpenCL CPU device beats the host backend, but only `all` may use it.
        let gpuOnly = try Scheduler.plan(graph: graph, batchSize: 16, computeUnits: .cpuAndGPU, devices: [D.cpu, D.openCLCPU])
        XCTAssertEqual(gpuOnly.devices, [D.cpu])
        let all = try Scheduler.plan(graph: graph, batchSize: 16, computeUnits: .all, devices: [D.cpu, D.openCLCPU])
        XCTAssertEqual(all.devices, [D.openCLCPU])
        XCTAssertFalse(ComputeUnits.cpuAndGPU.allows(D.farAccelerator))
        XCTAssertTrue(ComputeUnits.all.allows(D.farAccelerator))
        XCTAssertTrue(ComputeUnits.cpuOnly.allows(D.cpu))
        XCTAssertEqual(try ComputeUnits(parsing: "cpuAndGPU"), .cpuAndGPU)
        XCTAssertEqual(try ComputeUnits(parsing: "CPUONLY"), .cpuOnly)
        XCTAssertThrowsError(try ComputeUnits(parsing: "gpu"))
        XCTAssertEqual(ComputeUnits.default, .all)
    }

    func testDeviceWithoutEnoughMemoryIsPassedOver() throws {
        var small = D.fastGPU
        small.memoryBytes = 64 << 20  // SqueezeNet at batch 64 needs far more
        let plan = try Scheduler.plan(graph: try SchedulingGraphs.squeezeNet(), batchSize: 64, computeUnits: .all,
                                      devices: [D.cpu, small])
        XCTAssertEqual(plan.devices, [D.cpu])
        XCTAssertTrue(plan.candidates.contains { $0.tailDevice == "opencl:0" && !$0.fits })
    }

    func testPlanRowsFollowTheTrainingGraph() throws {
        let graph = try SchedulingGraphs.squeezeNet()
        let training = try TrainingGraph(graph: graph)
        let plan = try Scheduler.plan(graph: graph, batchSize: 8, computeUnits: .cpuOnly, devices: [D.cpu])
        let rows = plan.layers.filter { !$0.type.hasPrefix("loss") }
        XCTAssertEqual(Set(rows.map(\.name)), Set((training.prefix + training.tail).map(\.name)))
        XCTAssertEqual(Set(rows.filter { $0.segment == .prefix }.map(\.name)), Set(training.prefix.map(\.name)))
        // Frozen layers have no backward time; every tail layer has one.
        for row in rows {
            if row.segment == .prefix { XCTAssertNil(row.backwardMs, row.name) } else { XCTAssertNotNil(row.backwardMs, row.name) }
        }
        XCTAssertEqual(plan.layers.last?.type, "loss(categoricalCrossEntropy)")
        // A ReLU fused into its convolution launches nothing forward.
        let fused = try XCTUnwrap(plan.layers.first { $0.name == "relu_conv1" })
        XCTAssertEqual(fused.forwardMs, 0)
        // The total is the rows plus the transfers.
        let sum = plan.layers.reduce(0) { $0 + $1.forwardMs + ($1.backwardMs ?? 0) } + plan.transferMs
        XCTAssertEqual(plan.totalMs, sum, accuracy: 1e-9 * sum)
        XCTAssertNotNil(plan.cachedTotalMs)
        XCTAssertLessThan(try XCTUnwrap(plan.cachedTotalMs), plan.totalMs)
    }

    func testKernelTimeIsTheSlowerOfComputeAndMemoryPlusLatency() throws {
        let d = D.cpu  // 50 GFLOP/s, 10 GB/s, 1 µs
        let compute = KernelWork(OpCost(flops: 5e9, bytes: 1e6), isMatrix: true)
        XCTAssertEqual(CostModel.seconds(compute, on: d), 0.1 + 1e-6, accuracy: 1e-12)
        let memory = KernelWork(OpCost(flops: 1e6, bytes: 1e9))
        XCTAssertEqual(CostModel.seconds(memory, on: d), 0.1 + 1e-6, accuracy: 1e-12)
        // The GPU's matrix efficiency halves its rate for convolutions only.
        XCTAssertEqual(CostModel.seconds(compute, on: D.fastGPU), 5e9 / 5e12 + 10e-6, accuracy: 1e-12)
        // Copies: free within the host; per side that is a device, bytes / bandwidth + per-copy latency.
        XCTAssertEqual(CostModel.transferSeconds(bytes: 12e6, from: D.cpu, to: D.cpu), 0)
        XCTAssertEqual(CostModel.transferSeconds(bytes: 12e6, from: D.cpu, to: D.fastGPU), 1e-3 + 20e-6, accuracy: 1e-12)
        XCTAssertEqual(CostModel.transferSeconds(bytes: 12e6, from: D.fastGPU, to: D.slowGPU),
                       1e-3 + 20e-6 + 3e-3 + 40e-6, accuracy: 1e-12)
    }

    func testLayerWorkUsesTheOpDescriptions() throws {
        let graph = try SchedulingGraphs.convThenDense()
        let conv = try XCTUnwrap(graph.layer(named: "conv"))
        let g = try XCTUnwrap(try conv.convolutionGeometry(batch: 4))
        let frozen = try CostModel.work(for: conv, batch: 4, optimizer: .sgd, backwardData: false, backwardWeights: false)
        XCTAssertEqual(frozen.forward.map(\.cost), [g.forwardCost])
        XCTAssertTrue(frozen.backwardData.isEmpty && frozen.backwardWeights.isEmpty)
        let trained = try CostModel.work(for: conv, batch: 4, optimizer: .adam, backwardData: true, backwardWeights: true)
        XCTAssertEqual(trained.backwardData.map(\.cost), [g.backwardDataCost])
        XCTAssertEqual(trained.backwardWeights.first?.cost, g.backwardWeightsCost)
        XCTAssertEqual(trained.backwardWeights.count, 1)  // the gradients
        XCTAssertEqual(trained.optimizer.count, 2)  // one Adam step for weights and one for bias
        XCTAssertTrue(frozen.optimizer.isEmpty)
        // The training graph's step cost (and so the bench's GFLOP/s) is this same walk.
        let step = try TrainingGraph(graph: graph).stepCost(batch: 4)
        let tailWork = try TrainingGraph(graph: graph).tail.map { l in
            try CostModel.work(for: l, batch: 4, optimizer: .sgd, backwardData: false, backwardWeights: l.isUpdatable)
        }
        XCTAssertEqual(step.weightGradients, LayerWork.total(tailWork.flatMap(\.backwardWeights)))
        let fc = try XCTUnwrap(graph.layer(named: "fc"))
        let ip = try XCTUnwrap(try fc.innerProductGeometry(batch: 4))
        let both = try CostModel.work(for: fc, batch: 4, optimizer: .sgd, backwardData: true, backwardWeights: true)
        XCTAssertEqual(both.backwardData[0].cost.flops + both.backwardWeights[0].cost.flops, ip.backwardCost.flops)
    }

    func testPlanRejectsBadBatchAndRendersTextAndJSON() throws {
        let graph = try SchedulingGraphs.dense()
        XCTAssertThrowsError(try Scheduler.plan(graph: graph, batchSize: 0, computeUnits: .all, devices: [D.cpu]))
        let plan = try Scheduler.plan(graph: graph, batchSize: 4, computeUnits: .all, devices: [D.cpu, D.fastGPU])
        let text = plan.text()
        XCTAssertTrue(text.contains("Total per batch"), text)
        for l in plan.layers { XCTAssertTrue(text.contains(l.name), l.name) }
        let json = try plan.json()
        let object = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        XCTAssertEqual(object["batchSize"] as? Int, 4)
        XCTAssertEqual((object["layers"] as? [Any])?.count, plan.layers.count)
        XCTAssertEqual(try JSONDecoder().decode(ExecutionPlan.self, from: Data(json.utf8)), plan)
    }
}
