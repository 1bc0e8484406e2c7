import Foundation
import Updraft
import UpdraftCommandLine

/// The backends `updraft gradcheck` compares with the reference, after the finite-difference checks.
/// Other backends (each OpenCL device, the optimized CPU path) add themselves here; a backend that
/// cannot start (no device) should simply be left out.
func gradcheckBackends() -> [Backend] {
    var backends: [Backend] = [CPUBackend()]
    // Every OpenCL device present; one that fails to open is named on stderr and left out.
    let openCL = OpenCLBackend.all()
    for failure in openCL.failures {
        FileHandle.standardError.write(Data("warning: gradcheck leaves out an OpenCL device: \(failure)\n".utf8))
    }
    backends += openCL.backends as [Backend]
    return backends
}

let gradcheckCommand = CLICommand(CommandSpec(
    name: "gradcheck",
    summary: "check every op's gradients by finite differences, then compare each backend with the reference",
    options: [
        OptionSpec("op", value: "NAME", help: "only ops whose name contains NAME (e.g. convolution, pooling, adam)"),
        OptionSpec("quick", help: "a handful of cases instead of the full lists"),
    ],
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

    for backend in gradcheckBackends() {
        let comparison = BackendComparison(backend: backend)
        report("\(backend.name) vs reference (float32, \(comparison.tolerance))",
               comparison.run(quick ? .quick : .full, only: filter))
    }

    print("\ngradcheck: \(passed) passed, \(failed) failed")
    return failed == 0 ? 0 : 1
}
