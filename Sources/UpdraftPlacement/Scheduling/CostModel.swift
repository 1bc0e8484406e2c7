import UpdraftCore
import UpdraftModel

/// The scheduler's cost model: what each layer launches (one `KernelWork` per Backend call, its
/// FLOPs and bytes from the op descriptions in Ops/), and how long that takes on a device:
///
///     time(kernel, device) = max(flops / rate, bytes / bandwidth) + launch latency
///
/// where rate is the device's multiply-add rate (times its matrix efficiency for convolution and
/// matrix kernels). Copies between host and device take bytes / transfer bandwidth plus the
/// device's per-copy latency, for each side that is not the host. Times are estimates for choosing devices, not promises.
/// Estimates of kernel and layer times on a device (see the formula above): what the scheduler compares placements by.
public enum CostModel {
    /// Seconds for one kernel on a device.
    public static func seconds(_ k: KernelWork, on d: DeviceProfile) -> Double {
        let rate = d.fmaGFLOPS * 1e9 * (k.isMatrix ? d.matrixEfficiency : 1)
        let compute = k.cost.flops > 0 ? k.cost.flops / max(rate, 1) : 0
        let memory = k.cost.bytes > 0 ? k.cost.bytes / max(d.bandwidthGBps * 1e9, 1) : 0
        return max(compute, memory) + d.launchLatencyMicroseconds * 1e-6
    }

    /// Seconds for a sequence of kernels on a device: the sum of each one's estimate.
    public static func seconds(_ ks: [KernelWork], on d: DeviceProfile) -> Double {
        ks.reduce(0) { $0 + seconds($1, on: d) }
    }

    /// Seconds to move `bytes` from one place to another. The host is free to reach; between two
    /// OpenCL devices the tensor goes down to the host and up again.
    public static func transferSeconds(bytes: Double, from source: DeviceProfile, to destination: DeviceProfile) -> Double {
        if source == destination { return 0 }
        var t = 0.0
        for side in [source, destination] where !side.isHost {
            t += bytes / max(side.transferGBps * 1e9, 1) + side.transferLatencyMicroseconds * 1e-6
        }
        return t
    }

    /// The kernels of `layer` for a batch of `batch`, with the backward parts asked for.
    /// - Parameters:
    ///   - backwardData: the layer must produce its input gradient.
    ///   - backwardWeights: the layer's parameters are trained (gradients and an optimizer step).
    public static func work(for layer: GraphLayer, batch: Int, optimizer: OptimizerKind,
                            backwardData: Bool, backwardWeights: Bool) throws -> LayerWork {
        try layer.op.kind.work(layer, batch: batch, optimizer: optimizer, backwardData: backwardData,
                               backwardWeights: backwardWeights)
    }


    /// The loss kernel for a batch: fused softmax + cross-entropy on the logits, or mean squared error.
    static func lossWork(_ loss: GraphLoss, batch: Int) -> KernelWork {
        let count = (loss.inputShape.withBatch(batch)).count
        switch loss.kind {
        case .categoricalCrossEntropy:
            return KernelWork(OpCost(flops: Double(6 * count), bytes: f32Bytes(count, count, batch)))
        case .meanSquaredError:
            return KernelWork(OpCost(flops: Double(3 * count), bytes: f32Bytes(count, count, count)))
        }
    }
}
