import XCTest
@testable import UpdraftCore
@testable import UpdraftBackends
@testable import UpdraftModel
@testable import UpdraftData
@testable import UpdraftTraining

/// `UpdateConfiguration.reporting.profile` (`updraft train --profile`): every layer's passes timed, with the
/// cost model's work, the engine the backend chose, and the rows covering the measured step time.
final class TrainingProfileTests: XCTestCase {
    private func profiledRun(_ configure: (inout UpdateConfiguration) -> Void) throws -> TrainingProfile {
        var config = UpdateConfiguration()
        configure(&config)
        config.reporting.profile = true
        config.featureCache.enabled = false  // every step runs the whole network
        config.data.validationData = try SqueezeShaped.data(count: 5, seed: 99)
        let task = UpdateTask(model: try SqueezeShaped.model(batch: 4), trainingData: try SqueezeShaped.data(count: 16),
                              configuration: config)
        let context = task.run()
        XCTAssertEqual(context.task.state, .completed, "\(context.error.map { "\($0)" } ?? "")")
        return try XCTUnwrap(task.profile, "a profiled run keeps its profile")
    }

    func testEveryLayerPassIsTimedWithItsWorkAndEngine() throws {
        var settings: [(String, (inout UpdateConfiguration) -> Void)] = [("cpu", { c in
            let cpu = CPUBackend()
            cpu.convolutionAlgorithmOverride = .winograd4x4
            c.placement.backends = (cpu, cpu)
        })]
        if let context = try? OpenCLTestSupport.context() {
            settings.append(("opencl", { c in let b = OpenCLBackend(context: context); c.placement.backends = (b, b) }))
        }
        let graph = try NetworkGraph(model: try SqueezeShaped.model(batch: 4))
        for (name, configure) in settings {
            let profile = try profiledRun(configure)
            // 2 epochs of 16 examples in mini-batches of 4; validation is not profiled.
            XCTAssertEqual(profile.steps, 8, name)
            func row(_ layer: String, _ pass: String) -> TrainingProfile.Row? { profile.rows.first { $0.layer == layer && $0.pass == pass } }
            for layer in graph.layers where layer.name != "relu_conv10" || name == "cpu" {
                // (a ReLU fused into the layer before it runs inside that layer's kernel)
                if let r = row(layer.name, "forward") { XCTAssertEqual(r.calls, 8, "\(name) \(layer.name)") }
            }
            for updatable in ["fire2/expand1x1", "fire2/expand3x3", "conv10", "fullyconnected0"] {
                let backward = try XCTUnwrap(row(updatable, "backward"), "\(name): \(updatable) backward")
                let update = try XCTUnwrap(row(updatable, "update"), "\(name): \(updatable) update")
                XCTAssertEqual(backward.calls, 8, name)
                XCTAssertEqual(update.calls, 8, name)
                XCTAssertGreaterThan(backward.gflop, 0, name)
                XCTAssertTrue(update.engine.hasPrefix("SGD, "), "\(name): \(update.engine)")
            }
            XCTAssertNil(row("conv1", "backward"), "\(name): the frozen prefix has no backward pass")
            XCTAssertNil(row("conv1", "update"), "\(name): nor an update")
            XCTAssertNotNil(row("input", "input"), name)
            XCTAssertNotNil(row("loss", "loss"), name)
            // The forward rows' work is the cost model's, 8 steps of it.
            let conv1 = try XCTUnwrap(graph.layers.first { $0.name == "conv1" })
            let expected = try XCTUnwrap(conv1.convolutionGeometry(batch: 4)).forwardCost.flops * 8 / 1e9
            XCTAssertEqual(try XCTUnwrap(row("conv1", "forward")).gflop, expected, accuracy: expected * 1e-9, name)
            // Every millisecond is in a row or in the host remainder, and the rows hold most of it.
            XCTAssertEqual(profile.accountedMilliseconds + profile.otherMilliseconds, profile.stepMilliseconds,
                           accuracy: 1e-6 * profile.stepMilliseconds, name)
            XCTAssertGreaterThan(profile.accountedMilliseconds, 0.5 * profile.stepMilliseconds,
                                 "\(name): rows cover most of the step:\n\(profile.table())")
            XCTAssertTrue(profile.table().contains("rows cover"), name)
            if name == "cpu" {
                XCTAssertEqual(row("fire2/expand3x3", "forward")?.engine, "winograd-4x4", "the backend's forced algorithm is named")
                // Its input (the frozen squeeze's output) needs no gradient: only the weights' pass runs.
                XCTAssertEqual(row("fire2/expand3x3", "backward")?.engine, "weights im2col + OpenBLAS")
                XCTAssertEqual(row("fullyconnected0", "forward")?.engine, "OpenBLAS SGEMM")
                XCTAssertEqual(row("pool1", "forward")?.engine, "Updraft loops (\(CPUVectorLevel.active))", "the loops' vector level is named")
                XCTAssertNotNil(profile.sgemmGFLOPS["cpu"], "the CPU's SGEMM rate is measured at the end")
                XCTAssertNotNil(profile.percentOfSGEMM(try XCTUnwrap(row("fullyconnected0", "forward"))))
            }
        }
    }

    /// Pooling and inner-product rows name oneDNN where it runs them (the tuning or the override chose
    /// it), not the own engine.
    func testPoolingAndInnerProductNameTheirEngine() throws {
        if let reason = OneDNN.unavailableReason { throw XCTSkip("oneDNN unavailable: \(reason)") }
        let graph = try NetworkGraph(model: try SqueezeShaped.model(batch: 4))
        let pool = try XCTUnwrap(graph.layers.first { if case .pooling = $0.op { return true } else { return false } })
        let ip = try XCTUnwrap(graph.layers.first { if case .innerProduct = $0.op { return true } else { return false } })
        let cpu = CPUBackend(threads: 1)
        func engine(_ l: GraphLayer, backward: Bool = false) -> String {
            l.op.kind.engine(l, batch: 4, backward: backward, inputGradient: true, on: cpu)
        }
        XCTAssertEqual(engine(pool), "Updraft loops (\(CPUVectorLevel.active))")
        XCTAssertEqual(engine(ip), "OpenBLAS SGEMM")
        cpu.opEngineOverride = .onednn
        XCTAssertTrue(engine(pool).hasPrefix("oneDNN "), engine(pool))
        XCTAssertTrue(engine(ip).hasPrefix("oneDNN "), engine(ip))
        XCTAssertTrue(engine(ip, backward: true).hasPrefix("weights oneDNN "), engine(ip, backward: true))
        XCTAssertTrue(engine(ip, backward: true).contains(", input oneDNN "), engine(ip, backward: true))
    }

    /// The SGEMM rate is measured under any wrapper: its buffers are not the run's (a measuring
    /// wrapper's peak of backend buffers must not include them).
    func testSGEMMRateBypassesWrappers() throws {
        let wrapped = FailingBackend(CPUBackend(threads: 1))
        let profile = TrainingProfiler().profile(sgemmOn: [wrapped])
        XCTAssertNotNil(profile.sgemmGFLOPS[wrapped.name], "measured, under the wrapper's name")
        XCTAssertEqual(wrapped.calls[.makeBuffer] ?? 0, 0, "no buffer made through the wrapper")
        XCTAssertEqual(wrapped.calls[.innerProductForward] ?? 0, 0)
    }

    /// Off by default: no profile, and no waiting after each pass.
    func testNoProfileUnlessAsked() throws {
        var config = UpdateConfiguration()
        config.placement.backends = (CPUBackend(), CPUBackend())
        let task = UpdateTask(model: try SqueezeShaped.model(batch: 4), trainingData: try SqueezeShaped.data(count: 8), configuration: config)
        XCTAssertEqual(task.run().task.state, .completed)
        XCTAssertNil(task.profile)
    }
}
