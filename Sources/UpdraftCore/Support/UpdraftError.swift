/// Every error Updraft throws says what went wrong and, where there is one, what to do about it.
/// Subsystems with richer errors (OpenCL status codes, protobuf offsets) define their own types that
/// conform to `CustomStringConvertible` the same way; this one covers the rest.
public struct UpdraftError: Error, CustomStringConvertible, Equatable, Sendable {
    /// What sort of failure it is, for callers that handle some kinds differently (e.g. `.unsupported` layers).
    public enum Kind: String, Sendable {
        /// A value the caller passed (a flag, a shape, a parameter) is out of range or malformed.
        case invalidArgument
        /// A model file cannot be read, or cannot be trained (e.g. two layers with one name, no loss layer).
        case invalidModel
        /// Valid input that Updraft does not handle (yet), such as a layer type it does not implement.
        case unsupported
        /// A file cannot be read or written, or a state file Updraft wrote is damaged (a checkpoint, the calibration cache).
        case io
        /// A compute device failed or is missing (an OpenCL error, a pinned device that is not present, a calibration that gave unusable numbers).
        case device
        /// The training data cannot be used: empty, a bad example (image, shape, missing feature), or training that produced non-finite values.
        case data
        /// Another rank of a multi-process (mpirun) run failed or stopped answering.
        case ranks
        /// The run was cancelled (`cancel()` on the task) before it finished; the model as trained so far is still available.
        case cancelled
    }
    /// The sort of failure (a bad argument, model, file, device, data, a failed rank, a cancellation).
    public var kind: Kind
    /// What went wrong, naming the thing (file, layer, parameter, device).
    public var message: String
    /// What the user can do about it, if anything.
    public var hint: String?

    /// An error of `kind` with `message` and an optional `hint`.
    public init(_ kind: Kind, _ message: String, hint: String? = nil) {
        self.kind = kind
        self.message = message
        self.hint = hint
    }

    /// The message, then "  hint: ..." on a second line when there is a hint.
    public var description: String { hint.map { "\(message)\n  hint: \($0)" } ?? message }
}
