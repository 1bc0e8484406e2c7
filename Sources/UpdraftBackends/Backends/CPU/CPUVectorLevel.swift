import CUpdraftKernels

/// The vector level the CPU backend's element loops run at (the C target `CUpdraftKernels`: each
/// loop compiled for baseline x86-64, AVX2 + FMA + F16C and AVX-512, one table of them installed on
/// first use). The default is the best level this CPU and its OS run (cpuid, xgetbv);
/// `UPDRAFT_CPU_LEVEL=baseline|avx2|avx512` forces a lower one. Asking for a level the CPU lacks,
/// or for an unknown one, runs the best level it has and prints one warning at start-up, never an
/// illegal instruction. The levels give bit-identical results (element-wise loops, no contraction).
package enum CPUVectorLevel: Int, CaseIterable, Sendable, CustomStringConvertible {
    case baseline = 0
    case avx2 = 1
    case avx512 = 2

    /// The environment variable that forces a level.
    package static let variable = "UPDRAFT_CPU_LEVEL"

    /// "baseline", "avx2", "avx512": the names UPDRAFT_CPU_LEVEL takes.
    package var description: String { String(cString: upd_cpu_level_name(Int32(rawValue))) }

    /// The instruction sets the level needs.
    package var features: String {
        switch self {
        case .baseline: return "SSE2"
        case .avx2: return "AVX2, FMA, F16C"
        case .avx512: return "AVX-512 F/BW/VL/DQ"
        }
    }

    /// The level the kernels run at (chosen on first use: this call makes the choice if nothing has yet).
    package static var active: CPUVectorLevel { level(upd_cpu_level()) }

    /// The highest level this CPU and OS run.
    package static var supported: CPUVectorLevel { level(upd_cpu_supported_level()) }

    /// The start-up warning about UPDRAFT_CPU_LEVEL (already printed on stderr once), or nil.
    package static var warning: String? { upd_cpu_level_warning().map { String(cString: $0) } }

    /// What `request` (a value of UPDRAFT_CPU_LEVEL) gives on a CPU whose best level is `supported`,
    /// and the warning it deserves; installs nothing.
    package static func resolve(_ request: String?, supported: CPUVectorLevel) -> (level: CPUVectorLevel, warning: String?) {
        var buffer = [CChar](repeating: 0, count: 256)
        let l = upd_cpu_resolve(request, Int32(supported.rawValue), &buffer, buffer.count)
        let text = String(cString: buffer)
        return (level(l), text.isEmpty ? nil : text)
    }

    /// Installs `level` (lowered to `supported` when the CPU lacks it) and returns the level installed.
    /// For tests that compare the levels in one process; a program keeps the start-up choice.
    @discardableResult
    package static func force(_ level: CPUVectorLevel) -> CPUVectorLevel {
        Self.level(upd_cpu_force_level(Int32(level.rawValue)))
    }

    /// "avx512 (AVX-512 F/BW/VL/DQ; best this CPU has)" or "baseline (SSE2; forced by UPDRAFT_CPU_LEVEL, best avx2)".
    package static var summary: String {
        let (a, s) = (active, supported)
        return "\(a) (\(a.features); " + (a == s ? "the best this CPU has" : "forced by \(variable); the CPU has \(s)") + ")"
    }

    private static func level(_ raw: Int32) -> CPUVectorLevel { CPUVectorLevel(rawValue: Int(raw)) ?? .baseline }
}
