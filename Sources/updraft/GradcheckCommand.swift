import Foundation
import Updraft
import UpdraftCommandLine

/// One engine `updraft gradcheck` compares with the reference: a backend, what to call it, and
/// for an engine that only some ops use, the op names it runs (substrings, as `--op` takes them).
struct GradcheckEngine {
    var label: String
    var backend: Backend
    var ops: [String]? = nil
}

/// The engines `updraft gradcheck` compares with the reference, after the finite-difference checks:
/// every engine a tuner may choose. The CPU backend by its built-in rule, then with each other
/// convolution algorithm forced (Winograd F(2x2) and F(4x4), oneDNN where libdnnl.so.2 loads) and
/// with oneDNN's pooling and inner products forced;
/// each OpenCL device, then with CLBlast forced for its GEMM-shaped ops. A backend that cannot start
/// (no device) is left out, named on stderr.
func gradcheckBackends() -> [GradcheckEngine] {
    var engines = [GradcheckEngine(label: "cpu", backend: CPUBackend())]
    for algorithm in CPUConvolutionAlgorithm.allCases where algorithm != .im2col {
        if algorithm == .onednn, let reason = OneDNN.unavailableReason {
            FileHandle.standardError.write(Data("warning: gradcheck leaves out oneDNN: \(reason)\n".utf8))
            continue
        }
        let cpu = CPUBackend()
        cpu.convolutionAlgorithmOverride = algorithm
        engines.append(GradcheckEngine(label: "cpu, convolutions on \(algorithm.rawValue)", backend: cpu, ops: ["convolution"]))
    }
    // oneDNN's pooling and inner product, which `updraft tune --cpu` may also choose per shape.
    if OneDNN.isAvailable {
        let cpu = CPUBackend()
        cpu.opEngineOverride = .onednn
        engines.append(GradcheckEngine(label: "cpu, pooling and inner products on onednn", backend: cpu, ops: ["pooling", "innerProduct"]))
    }
    // Every OpenCL device present; one that fails to open is named on stderr and left out.
    let openCL = OpenCLBackend.all()
    for failure in openCL.failures {
        FileHandle.standardError.write(Data("warning: gradcheck leaves out an OpenCL device: \(failure)\n".utf8))
    }
    for backend in openCL.backends {
        engines.append(GradcheckEngine(label: backend.name, backend: backend))
        var tuning = OpenCLTuning.forDevice(backend.device)
        tuning.forced = .clblast
        engines.append(GradcheckEngine(label: backend.name + ", GEMMs on CLBlast",
                                       backend: OpenCLBackend(context: backend.context, tuning: tuning),
                                       ops: ["convolution", "innerProduct"]))
    }
    return engines
}

let gradcheckCommand = CLICommand(CommandSpec(
    name: "gradcheck",
    summary: "check every op's gradients by finite differences, then compare each backend with the reference",
    options: OptionSpec.table("""
        --op NAME  only ops whose name contains NAME (e.g. convolution, pooling, adam)
        --quick    a handful of cases instead of the full lists
        """),
    discussion: """
        The finite-difference table checks the Double reference's backward passes against central \
        differences of its forward passes (optimizers: against their closed forms). Each backend table \
        compares a backend's outputs, gradients, losses and optimizer states with the reference on \
        awkward sizes, within \(Tolerance.float32) (scaled as described in Tolerance). \
        Exits with status 1 if any check fails.
        """
)) { args in
    let filter = args.value("op")
    let quick = args.flag("quick")
    var passed = 0, failed = 0
    func report(_ title: String, _ rows: [ComparisonRow]) {
        print("\n== \(title)")
        print(rows.isEmpty ? "(no cases match)\n" : ComparisonRow.table(rows), terminator: "")
        passed += rows.filter(\.ok).count
        failed += rows.filter { !$0.ok }.count
    }

    let gradientCases: [OpCase] = quick ? .gradientCheckQuick : .gradientCheck
    report("finite differences (reference, Double, step \(GradientCheck.step), \(GradientCheck.tolerance))",
           GradientCheck.run(gradientCases, only: filter))

    for engine in gradcheckBackends() {
        let comparison = BackendComparison(backend: engine.backend)
        let cases: [OpCase] = quick ? .quick : .full
        // An engine for some ops runs only their cases (those of them --op names, with --op).
        let own = engine.ops.map { ops in cases.filter { c in ops.contains { c.matches($0) } } } ?? cases
        let rows = comparison.run(own, only: filter)
        if engine.ops != nil && rows.isEmpty { continue }
        report("\(engine.label) vs reference (float32, \(comparison.tolerance))", rows)
    }

    print("\ngradcheck: \(passed) passed, \(failed) failed")
    return failed == 0 ? 0 : 1
}
