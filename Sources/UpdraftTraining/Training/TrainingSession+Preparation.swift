import Foundation
import UpdraftCore
import UpdraftData

extension TrainingSession {
    /// Makes every replica ready (`Executor.prepare(batch:)`) for the batch sizes its steps take in
    /// the first epoch — the mini-batch, a short last batch, each replica's and each rank's share —
    /// before it starts, and keeps the time taken as `preparationSeconds`. A preparation that fails
    /// is a warning: the first step then makes what it needs itself (and meets the error, if any, where
    /// device-failure recovery handles it). `UPDRAFT_PREPARE=off` in the run's environment skips it (to
    /// measure what it saves: the first epoch then makes everything itself).
    func prepareDevices() {
        guard configuration.environment.preparesDevices else { return }
        let start = DispatchTime.now().uptimeNanoseconds
        defer { preparationSeconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9 }
        let plan = EpochPlan(exampleCount: task.trainingData.count, batchSize: parameters.miniBatchSize, epoch: position.epoch,
                             shuffle: parameters.shuffle, seed: parameters.seed, shortLastBatch: configuration.data.shortLastBatch)
        let counts = Set(plan.batches.map { batch in exchange.map { $0.distributed.share(of: batch).local.count } ?? batch.count })
        do {
            for count in counts.sorted(by: >) {
                let slices = devices.replicas.count == 1 ? [count] : DataParallelism.sliceSizes(count: count, shares: devices.shares)
                for (executor, slice) in zip(devices.replicas, slices) { try executor.prepare(batch: slice) }
            }
        } catch {
            task.warn("could not prepare the devices before the first step (\(firstLine(of: error))); the steps make what they need as they go")
        }
    }
}
