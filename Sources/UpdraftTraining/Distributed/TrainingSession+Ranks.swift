import Foundation

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
        if let url = configuration.checkpointURL {
            try writeCheckpoint()
            error.message += "; rank 0 wrote the checkpoint of \(position.description) to \(url.path)"
        }
        throw error
    }
}
