/// Every error Updraft throws says what went wrong and, where there is one, what to do about it.
/// Subsystems with richer errors (OpenCL status codes, protobuf offsets) define their own types that
/// conform to `CustomStringConvertible` the same way; this one covers the rest.
public struct UpdraftError: Error, CustomStringConvertible, Equatable, Sendable {
    /// What sort of failure it is, for callers that handle some kinds differently (e.g. `.unsupported` layers).
    public enum Kind: String, Sendable {
        case invalidArgument      // a value the caller passed (a flag, a shape, a parameter)
        case invalidModel         // a model file that cannot be read or trained
        case unsupported          // valid input that Updraft does not handle (yet)
        case io                   // a file that cannot be read or written
        case device               // a compute device that failed or is missing
        case data                 // a training example that cannot be used
        case ranks                // another rank of a multi-process (mpirun) run failed or stopped answering
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
