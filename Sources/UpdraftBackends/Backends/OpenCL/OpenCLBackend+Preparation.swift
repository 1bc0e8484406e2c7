import Foundation
import UpdraftCore

// Programs built before the first step (DeviceOps+Preparation.swift). Each preparation op names the
// programs its passes will launch — the same file and defines the launch computes
// (`convolutionLaunch`, `gemmLaunch`, `opsDefines`) — and `buildRequestedPrograms` builds those not
// built yet together, several at once (`OpenCLContext.buildPrograms`), each loaded from the program
// binary cache where it holds one. What is not named here (half-storage variants, CLBlast's own
// kernels, a tiling the device turns out unable to launch) is built on its first launch, as before.
extension OpenCLBackend {
    /// Asks for the programs `passes` of the convolution `g` launch: the implicit-GEMM kernel of each
    /// pass (or the direct grouped kernels), the bias-gradient and split-sum reductions with the weight
    /// gradient. Returns how many programs it asked for that were not asked for before.
    func requestConvolutionPrograms(_ g: ConvGeometry, passes: PreparedPasses, epilogue: Activation?, outputChannels: Int,
                                    residual: Bool) throws -> Int {
        var wanted: [(file: String, defines: [String: String])] = []
        var families: [KernelFamily] = passes.contains(.backwardWeights) ? [.gemmReduce] : []
        let grouped = usesGroupedDirect(g)
        // The direct grouped kernels run every pass but a forward with an epilogue into a concat's slice.
        let directForward = grouped && (epilogue == nil || outputChannels == g.outChannels)
        if grouped && (passes != .forward || directForward) { wanted.append(("grouped_convolution.cl", opsDefines)) }
        if directForward && passes.contains(.forward) { families += [.activation, .elementwise] }
        let steps: [(PreparedPasses, ConvolutionPass, KernelShape)] = [
            (.forward, .forward(storage: .none, residual: residual), KernelShape(g, .convForward, fusedReLU: epilogue != nil)),
            (.backwardData, .backwardData, KernelShape(g, .convBackwardData)),
            (.backwardWeights, .backwardWeights, KernelShape(g, .convBackwardWeights))]
        for (asked, pass, shape) in steps where passes.contains(asked) && (asked == .forward ? !directForward : !grouped) {
            let variant = tuning.variant(for: shape)
            if variant?.engine == .clblast { continue }  // CLBlast builds (and caches) its own kernels
            wanted.append(("convolution.cl", try convolutionLaunch(g, pass, variant: variant).defines))
        }
        return request(wanted + families.map(program(of:)))
    }

    /// Asks for the GEMM programs of an inner product's `passes` (and the bias-gradient reduction).
    func requestInnerProductPrograms(_ g: InnerProductGeometry, passes: PreparedPasses) throws -> Int {
        var ops: [GemmOperation] = []
        if passes.contains(.forward) {
            var forward = GemmOperation(m: g.batch, n: g.outputChannels, k: g.inputChannels, transB: true)
            forward.bias = g.hasBias ? .perColumn : .none
            ops.append(forward)
        }
        if passes.contains(.backwardData) { ops.append(GemmOperation(m: g.batch, n: g.inputChannels, k: g.outputChannels)) }
        if passes.contains(.backwardWeights) {
            ops.append(GemmOperation(m: g.outputChannels, n: g.inputChannels, k: g.batch, transA: true))
        }
        var wanted: [(file: String, defines: [String: String])] = []
        for op in ops where op.m > 0 && op.n > 0 {
            let variant = tuning.variant(for: KernelShape(op))
            if variant?.engine == .clblast { continue }
            wanted.append(("gemm.cl", try gemmLaunch(op, variant: variant).defines))
        }
        if passes.contains(.backwardWeights) { wanted.append(program(of: .gemmReduce)) }
        return request(wanted)
    }

    /// Asks for the programs of shape-independent op families.
    func requestPrograms(families: [KernelFamily]) -> Int { request(families.map(program(of:))) }

    /// Builds every program asked for since the last call, several at once; returns how many were
    /// built or loaded from the binary cache (0 when all were built already).
    func buildRequestedPrograms() throws -> Int {
        try context.buildPrograms(requestedPrograms.take().map { ($0.file, programDefines($0.defines)) })
    }

    /// The defines of `opsKernel`'s programs: the reductions' work-group size.
    var opsDefines: [String: String] { ["WG_SIZE": "\(reductionGroupSize)"] }

    /// The defines a program of this backend is built with: `defines` and the activation codes (`kernel`).
    func programDefines(_ defines: [String: String]) -> [String: String] {
        defines.merging(ActivationKind.openCLDefines) { own, _ in own }
    }

    private func program(of family: KernelFamily) -> (file: String, defines: [String: String]) {
        (family.rawValue + ".cl", opsDefines)
    }

    private func request(_ programs: [(file: String, defines: [String: String])]) -> Int {
        requestedPrograms.add(programs)
    }
}

/// The programs preparation asked for and `buildRequestedPrograms` has not built yet (tasks on other
/// threads may prepare their backends at the same time, hence the lock).
final class OpenCLRequestedPrograms: @unchecked Sendable {
    private let lock = NSLock()
    private struct Key: Hashable { var file: String; var defines: [String: String] }
    private var pending: [(file: String, defines: [String: String])] = []
    private var keys = Set<Key>()

    /// Adds the programs not asked for before; returns how many that was.
    func add(_ programs: [(file: String, defines: [String: String])]) -> Int {
        lock.lock(); defer { lock.unlock() }
        var added = 0
        for p in programs where keys.insert(Key(file: p.file, defines: p.defines)).inserted {
            pending.append(p)
            added += 1
        }
        return added
    }

    /// The programs asked for since the last call.
    func take() -> [(file: String, defines: [String: String])] {
        lock.lock(); defer { lock.unlock() }
        defer { pending.removeAll() }
        return pending
    }
}
