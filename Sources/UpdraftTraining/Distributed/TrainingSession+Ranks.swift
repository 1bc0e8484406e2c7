import Foundation
import UpdraftData

extension TrainingSession {
    /// The exchange of a multi-rank run, after checking that every rank trains the same model on the
    /// same data with the same plan.
    static func makeExchange(_ distributed: DistributedTraining,
                             session: (parameters: TrainingParameters, devices: TrainingDevices, task: UpdateTask)) throws -> GradientExchange {
        let tensors = session.devices.primary.trainableTensors().map { (layer: $0.layer, count: $0.slot.count) }
        let p = session.parameters
        try distributed.checkAgreement([
            ("training examples", Double(session.task.trainingData.count)),
            ("mini-batch size", Double(p.miniBatchSize)),
            ("epochs", Double(p.epochs)),
            ("shuffling", p.shuffle ? 1 : 0),
            ("seed (low 32 bits)", Double(p.seed & 0xffff_ffff)),
            ("trained values", Double(tensors.reduce(0) { $0 + $1.count })),
        ])
        return GradientExchange(distributed: distributed, tensors: tensors)
    }
}

extension TrainingSession {
    /// Every rank stops on the same error (a rank's device failed and it may not, or cannot, fall
    /// back): rank 0 writes the checkpoint of the last completed step to the checkpoint URL, then
    /// each rank throws the error, which says where that checkpoint is.
    func stopWithTheOtherRanks(_ stop: RankStop) throws -> Never {
        var error = stop.error
        if let url = configuration.checkpoints.url {
            try writeCheckpoint()
            error.message += "; rank 0 wrote the checkpoint of \(position.description) to \(url.path)"
        }
        throw error
    }
}

extension TrainingSession {
    /// At the end of an epoch (after `checkWeights`, which read the state back): every rank holds
    /// the same trained state, to the bit. Ranks on different devices — one that fell back to its
    /// CPU after its device failed — may round an update differently; when the states' fingerprints
    /// differ, every rank takes rank 0's state (broadcast), with a warning the first time, so the
    /// ranks go on as one.
    func keepRanksInStep(position: String) throws {
        guard let exchange, let state = finiteState.lastFinite?.state else { return }
        let distributed = exchange.distributed, world = distributed.world
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for t in state.tensors {
            for values in [t.values] + t.state {
                for v in values { hash = (hash ^ UInt64(v.bitPattern)) &* 0x100_0000_01b3 }
            }
        }
        let fingerprints = try distributed.gather([Double(hash >> 32), Double(hash & 0xffff_ffff)])
        guard fingerprints.contains(where: { $0 != fingerprints[0] }) else { return }
        let flat = state.tensors.flatMap { t in ([t.values] + t.state).flatMap { $0.map(Double.init) } }
        let zeroth = try world.run("sending rank 0's state") { try world.broadcast(flat) }
        var synced = state, offset = 0
        for (i, t) in state.tensors.enumerated() {
            func take(_ n: Int) -> [Float] { defer { offset += n }; return zeroth[offset..<offset + n].map(Float.init) }
            synced.tensors[i].values = take(t.values.count)
            synced.tensors[i].state = t.state.map { take($0.count) }
        }
        for r in devices.replicas { try r.restoreState(synced) }
        let differing = fingerprints.indices.filter { fingerprints[$0] != fingerprints[0] }
        // Once per run, by rank 0: after a fallback it happens every epoch.
        guard !exchange.statesDiffered else { return }
        exchange.statesDiffered = true
        guard distributed.isPrimary else { return }
        task.warn("at \(position) the trained state of rank\(differing.count == 1 ? "" : "s") "
                  + differing.map(String.init).joined(separator: ", ") + " differed from rank 0's (a rank on another device "
                  + "since a fallback rounds differently); every rank goes on from rank 0's, as at every epoch's end")
    }
}
