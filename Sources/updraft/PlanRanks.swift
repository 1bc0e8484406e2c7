import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft plan` across ranks: under mpirun each rank plans its share of the batch on its own
/// devices, the gradient exchange is measured with the model's gradient bytes, and rank 0 prints
/// every rank's plan and the estimated step. Without mpirun, `--ranks N --link-gbps G` projects the
/// exchange from a given link speed instead.
struct RankPlanning {
    /// Bytes of gradients a step exchanges: every updatable layer's weights and bias, as float32.
    static func gradientBytes(model: CoreMLModel, graph: NetworkGraph) throws -> Int {
        try graph.updatableLayers.reduce(0) { sum, layer in
            sum + 4 * (try model.weights(ofLayer: layer.name).count + (try model.bias(ofLayer: layer.name)?.count ?? 0))
        }
    }

    /// Lines describing the ranks, the exchange and the step, printed after the plan.
    static func lines(ranks: Int, batch: Int, perRank: Int, plans: [(rank: Int, summary: String, ms: Double)],
                      gradientBytes: Int, exchangeSeconds: Double, bandwidth: String) -> [String] {
        let slowest = plans.map(\.ms).max() ?? 0
        var out = ["", "Ranks: \(ranks); global batch \(batch), up to \(perRank) examples per rank (examples split by index)"]
        out.append("rank  est. ms per batch  plan")
        for p in plans { out.append(String(format: "%4d  %17.3f  ", p.rank, p.ms) + p.summary) }
        let mb = Double(gradientBytes) / 1e6
        out.append(String(format: "Gradient exchange: %.3f MB per step, %@: %.3f ms per step", mb, bandwidth, exchangeSeconds * 1000))
        out.append(String(format: "Estimated step: %.3f ms (slowest rank %.3f + exchange %.3f; buckets overlap backward, so this is an upper bound)",
                          slowest + exchangeSeconds * 1000, slowest, exchangeSeconds * 1000))
        return out
    }
}
