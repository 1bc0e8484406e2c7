import Foundation
import UpdraftCore
import UpdraftBackends
import UpdraftModel
import UpdraftPlacement
import UpdraftData

/// How to train (MLModelConfiguration, and what Core ML cannot do), in groups: where the work runs
/// (`placement`), the examples (`data`), the frozen prefix's feature cache (`featureCache`),
/// checkpoints and resuming (`checkpoints`), what the run reports (`reporting`) and a k-NN's
/// settings (`nearestNeighbors`); what shapes the training itself stays at the top.
///
///     var configuration = UpdateConfiguration()
///     configuration.placement.computeUnits = .cpuAndGPU
///     configuration.checkpoints.url = URL(fileURLWithPath: "checkpoint.mlmodel")
///     configuration.checkpoints.everyEpochs = 1
public struct UpdateConfiguration {
    /// Parameter overrides, checked against the model's allowed values when training starts.
    public var parameters: [ParameterKey: ParameterValue] = [:]
    /// The optimizer the run trains with instead of the one the model's update parameters name: e.g.
    /// `.adamW`, past Core ML (the written model keeps its own SGD or Adam). Nil: the model's.
    public var optimizer: OptimizerKind? = nil
    /// What a NaN or infinite mini-batch loss does: stop training (keeping the last finite state),
    /// or skip the mini-batch.
    public var nonFinite: NonFinitePolicy = .stop
    /// Keep the frozen prefix's activations (the layers before the first updatable one, forward
    /// only) as IEEE halves: half the bytes of the prefix's workspace, fp32 arithmetic, every stored
    /// value rounded to nearest even (`TrainingGraph.halfPrecisionPrefix`). The tail and the feature
    /// cache receive the boundary blobs as floats that carry that rounding, so `featureCache.halfPrecision`
    /// adds no further rounding on top of it. A model with no frozen prefix is refused.
    public var frozenActivationsHalfPrecision = false
    /// Train as one rank of an MPI job (`DistributedTraining.launched()`): each rank trains its share
    /// of every mini-batch and the gradients are summed over the ranks; rank 0 alone writes checkpoints.
    public var distributed: DistributedTraining? = nil
    /// The run's `UPDRAFT_*` settings (`UpdraftEnvironment`): the process's, read once, unless set.
    public var environment = UpdraftEnvironment.process

    /// Where the work runs: compute units, a pinned device, data parallelism, fallbacks.
    public var placement = PlacementSettings()
    /// The examples: validation data, the last mini-batch, augmentation, prefetching.
    public var data = DataSettings()
    /// The frozen prefix's outputs cached per example.
    public var featureCache = FeatureCacheSettings()
    /// Periodic checkpoints, and the checkpoint a run resumes from.
    public var checkpoints = CheckpointSettings()
    /// What the run records besides its events: TensorBoard, a per-layer profile.
    public var reporting = ReportingSettings()
    /// A k-NN's k and unknown-label distance (a network's run ignores them).
    public var nearestNeighbors = NearestNeighborSettings()

    /// Send image data (a `PixelBatchProvider`) to the device as 8-bit samples, scaled there; false
    /// sends float tensors, as for other data (results are identical either way; tests and
    /// measurements compare the two). Default: `environment.uploadsPixels`.
    var pixelUpload: Bool {
        get { environment.uploadsPixels }
        set { environment.uploadsPixels = newValue }
    }

    /// The defaults: the model's own parameters, scheduled compute units, a feature cache, no checkpoints.
    public init() {}

    /// Where the work runs.
    public struct PlacementSettings {
        /// Which compute units training may use, as Core ML's `MLModelConfiguration.computeUnits`: the
        /// scheduler picks the devices (and data-parallel replicas) within them when neither `backends`
        /// nor `dataParallel` is set. `.cpuOnly` runs on the fast CPU path; `.cpuAndGPU` and `.all` may use
        /// OpenCL devices, falling back to the CPU (with a warning) where none works.
        public var computeUnits: ComputeUnits = .default
        /// Run everything on this device, whatever the scheduler would pick (as `--device`; the
        /// `UPDRAFT_DEVICE` environment variable when nil).
        public var preferredDevice: DevicePin? = nil
        /// A device named as `--device` names one (an index or a part of a name from `updraft devices`,
        /// or cpu), resolved when the run is scheduled; wins over `preferredDevice`.
        public var deviceOption: String? = nil
        /// Whether the scheduler may split mini-batches across devices (as `--data-parallel`; the
        /// `UPDRAFT_DATA_PARALLEL` environment variable, else `.auto`, when nil).
        public var dataParallelMode: DataParallelMode? = nil
        /// The work the scheduler places: the examples of one pass (training takes its passes from the
        /// epochs). With it, placements are weighed set-up included (a device's context and program
        /// builds against every batch), so a job of a few examples stays on the CPU. `UpdateTask` sets it
        /// from its training data, the predictors from the examples they are given; nil: weighed per batch.
        public var job: Scheduler.Job? = nil
        /// Expert override: the backends for the frozen prefix and the trainable tail (for example
        /// `ReferenceBackend()` to train on the Double reference). Nil: scheduled from `computeUnits`.
        /// Ignored when `dataParallel` is set.
        public var backends: (prefix: Backend, tail: Backend)?
        /// Train on several devices at once: each mini-batch is split between the replicas and their
        /// gradients combined before one identical update on each. Wins over `backends`.
        public var dataParallel: DataParallelism?
        /// Where training goes on when a device fails (a kernel that does not build, memory that runs
        /// out, a device error mid-training), in the order tried, after any data-parallel replicas that
        /// still work. Nil: the host CPU backend, unless training already runs only on the host.
        /// Empty: none, and a device failure ends training. Backends that training already runs on
        /// are not fallbacks.
        public var fallbacks: [Backend]?
        /// How often to keep a host copy of the state (and the steps since) so a lost device loses nothing.
        public var snapshots: SnapshotPolicy = .automatic
        /// Scheduled from `.default` compute units.
        public init() {}
    }

    /// The examples a run reads.
    public struct DataSettings {
        /// Evaluated at the end of every epoch (loss and accuracy).
        public var validationData: BatchProvider?
        /// Keep a short last mini-batch instead of filling it by wrapping round (Core ML's behaviour).
        public var shortLastBatch = false
        /// Random flips (and, for image data sets, a random resized crop) applied to each training
        /// example, seeded by (seed, epoch, index). A crop turns the feature cache off, with a warning.
        public var augmentation: ImageAugmentation = .none
        /// Mini-batches whose examples are loaded (decoded) ahead of training, on worker threads.
        public var prefetchDepth = 2
        /// No validation data, Core ML's wrapped last batch, no augmentation, 2 batches ahead.
        public init() {}
    }

    /// The frozen prefix's outputs, cached per example (results are identical either way).
    public struct FeatureCacheSettings {
        /// Cache them (on by default).
        public var enabled = true
        /// Host memory the cache may use (its host tier; on the CPU backends and PoCL, all of it).
        public var budgetBytes = 4 << 30
        /// Device memory the cache may use on a GPU before spilling to host memory. Nil: half of
        /// the device's memory (on host-memory backends, the host budget). 0: keep features on the host only.
        public var deviceBudgetBytes: Int? = nil
        /// Keep cached features in half precision (fp16 storage, fp32 arithmetic): half the memory, so
        /// twice the examples per budget, at the cost of rounding the tail's inputs to 11 significant bits:
        /// in every epoch, the first included (a cached example's features are rounded from the step that computes them).
        public var halfPrecision = false
        /// On, 4 GiB of host memory, half the device's, single precision.
        public init() {}
    }

    /// Periodic checkpoints and resuming.
    public struct CheckpointSettings {
        /// Write a checkpoint to `url` every N epochs: the model, its history, and the state
        /// to resume from (`TrainingCheckpoint`, in `<model>.resume`).
        public var everyEpochs: Int? = nil
        /// Also write a checkpoint after every N-th mini-batch (counted over the whole run).
        public var everyMiniBatches: Int? = nil
        /// Where periodic checkpoints are written (the model file; its state goes beside it as `<model>.resume`).
        /// Nil: no periodic checkpoints are written, whatever `everyEpochs` says. In an MPI job only rank 0 writes.
        public var url: URL? = nil
        /// Continue the run this checkpoint was taken from, exactly: its weights, optimizer state,
        /// position, parameters and history. The model and training data must be the checkpoint's
        /// (checked); settings that shape the run (epochs, mini-batch size, shuffle, seed, augmentation,
        /// short last batch) must agree with it; optimizer settings in `parameters` override its values.
        /// See `UpdateTask(resumingFrom:trainingData:configuration:handlers:)`.
        public var resumeFrom: TrainingCheckpoint? = nil
        /// No checkpoints, a fresh run.
        public init() {}
    }

    /// What a run records besides its progress events.
    public struct ReportingSettings {
        /// Log the run for TensorBoard in this folder (made when missing): a new
        /// `events.out.tfevents.*` file with losses, accuracies, learning rate, throughput, weight and
        /// gradient histograms, the validation confusion matrix, the hyperparameters and the hparams
        /// plugin's session records
        /// (`TensorBoardRun`). A folder that cannot be written fails the task before training; a write
        /// that fails later is a warning, and training goes on. In an MPI job only rank 0 writes. A
        /// k-NN update logs nothing yet.
        public var tensorboardDirectory: URL? = nil
        /// Time every pass of every layer of every training step (waiting for each, so the run is slower)
        /// and keep the result as `UpdateTask.profile`: where the step time goes, per layer and pass, with
        /// GFLOP/s and the engine that ran it. Off by default.
        public var profile = false
        /// Nothing recorded.
        public init() {}
    }

    /// A k-NN's settings (a network's run ignores them).
    public struct NearestNeighborSettings {
        /// k (`--neighbors`): the neighbours that vote when it predicts, and for an update the
        /// k written into the model; checked against the model's allowed values (numberOfNeighbors'
        /// range or set). Nil: the model's own.
        public var k: Int? = nil
        /// A k-NN predicts its default label when the nearest sample is farther than this Euclidean
        /// distance (`--unknown-distance`; Updraft's, not Core ML's). Nil: never.
        public var unknownDistance: Double? = nil
        /// The model's own k; no unknown label.
        public init() {}
    }
}
