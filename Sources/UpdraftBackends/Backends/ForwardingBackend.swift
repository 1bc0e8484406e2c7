import UpdraftCore

/// A `Backend` that passes every call to `inner` through one hook, `intercept(_:_:)`: the base of
/// wrappers that count, time or fail calls (the benchmark's measuring backend, the tests' failure
/// injection). Every op reaches it through the one generic `run(_:)`, keyed by the op's
/// `DeviceOp.kind`, so a new op needs nothing here; the memory requirements are forwarded one by one,
/// defaulted ones included, so a wrapper cannot miss one and quietly take a default path production
/// never takes.
open class ForwardingBackend: Backend {
    /// The backend that does the work; every call and property is passed on to it.
    public let inner: Backend

    /// Wraps `inner`; the wrapper reports `inner`'s name, memory and capabilities as its own.
    public init(_ inner: Backend) { self.inner = inner }

    /// Runs one call. Subclasses count, time or fail calls here, then call `body` (or not).
    open func intercept<T>(_ call: BackendCall, _ body: () throws -> T) throws -> T { try body() }

    /// `inner`'s name, unchanged (not intercepted).
    open var name: String { inner.name }
    /// `inner`'s memory, unchanged (not intercepted).
    open var memory: BackendMemory { inner.memory }
    /// `inner`'s value, unchanged (not intercepted).
    open var runsOnHostCPU: Bool { inner.runsOnHostCPU }
    /// `inner`'s value, unchanged (not intercepted).
    open var writesConvolutionSlices: Bool { inner.writesConvolutionSlices }

    // MARK: Memory
    /// Passes `Backend.makeBuffer` to `inner` through `intercept(_:_:)` as `.makeBuffer` with its shape as `detail`.
    open func makeBuffer(count: Int) throws -> DeviceBuffer {
        try intercept(BackendCall(.makeBuffer, { "\(count)" })) { try inner.makeBuffer(count: count) }
    }
    /// Passes `Backend.upload` to `inner` through `intercept(_:_:)` as `.upload`.
    open func upload(_ values: [Float], to buffer: DeviceBuffer) throws {
        try intercept(BackendCall(.upload)) { try inner.upload(values, to: buffer) }
    }
    /// Passes `Backend.download` to `inner` through `intercept(_:_:)` as `.download`.
    open func download(_ buffer: DeviceBuffer) throws -> [Float] {
        try intercept(BackendCall(.download)) { try inner.download(buffer) }
    }
    /// Passes `Backend.downloadLater` to `inner` through `intercept(_:_:)` as `.downloadLater`.
    open func downloadLater(_ buffer: DeviceBuffer) throws -> PendingDownload {
        try intercept(BackendCall(.downloadLater)) { try inner.downloadLater(buffer) }
    }
    /// Passes `Backend.fill` to `inner` through `intercept(_:_:)` as `.fill`.
    open func fill(_ buffer: DeviceBuffer, with value: Float) throws {
        try intercept(BackendCall(.fill)) { try inner.fill(buffer, with: value) }
    }
    /// Passes `Backend.copy` to `inner` through `intercept(_:_:)` as `.copy`.
    open func copy(_ source: DeviceBuffer, to destination: DeviceBuffer) throws {
        try intercept(BackendCall(.copy)) { try inner.copy(source, to: destination) }
    }
    /// Passes `Backend.accumulate` to `inner` through `intercept(_:_:)` as `.accumulate`.
    open func accumulate(_ source: DeviceBuffer, into destination: DeviceBuffer) throws {
        try intercept(BackendCall(.accumulate)) { try inner.accumulate(source, into: destination) }
    }
    /// Passes `Backend.synchronize` to `inner` through `intercept(_:_:)` as `.synchronize`.
    open func synchronize() throws { try intercept(BackendCall(.synchronize)) { try inner.synchronize() } }

    // MARK: Ranges and rows
    /// Passes `Backend.uploadPixels` to `inner` through `intercept(_:_:)` as `.uploadPixels` with its shape as `detail`.
    open func uploadPixels(_ pixels: UnsafeBufferPointer<UInt8>, shape: Shape, scale: DeviceBuffer?, shift: DeviceBuffer?,
                           to output: DeviceBuffer) throws {
        try intercept(BackendCall(.uploadPixels, { "\(shape)" })) {
            try inner.uploadPixels(pixels, shape: shape, scale: scale, shift: shift, to: output)
        }
    }
    /// Passes `Backend.upload` to `inner` through `intercept(_:_:)` as `.uploadRange`.
    open func upload(_ values: [Float], to buffer: DeviceBuffer, offset: Int) throws {
        try intercept(BackendCall(.uploadRange)) { try inner.upload(values, to: buffer, offset: offset) }
    }
    /// Passes `Backend.download` to `inner` through `intercept(_:_:)` as `.downloadRange`.
    open func download(_ buffer: DeviceBuffer, offset: Int, count: Int) throws -> [Float] {
        try intercept(BackendCall(.downloadRange)) { try inner.download(buffer, offset: offset, count: count) }
    }
    /// Passes `Backend.copyRows` to `inner` through `intercept(_:_:)` as `.copyRows`.
    open func copyRows(_ source: DeviceBuffer, rows sourceRows: [Int], to destination: DeviceBuffer,
                       rows destinationRows: [Int], rowLength: Int) throws {
        try intercept(BackendCall(.copyRows)) {
            try inner.copyRows(source, rows: sourceRows, to: destination, rows: destinationRows, rowLength: rowLength)
        }
    }
    /// Passes `Backend.copyRows` to `inner` through `intercept(_:_:)` as `.copyHalfRows`.
    open func copyRows(_ source: DeviceBuffer, rows sourceRows: [Int], to destination: DeviceBuffer,
                       rows destinationRows: [Int], rowLength: Int, toHalf: Bool) throws {
        try intercept(BackendCall(.copyHalfRows)) {
            try inner.copyRows(source, rows: sourceRows, to: destination, rows: destinationRows, rowLength: rowLength, toHalf: toHalf)
        }
    }

    // MARK: Ops
    /// Passes every `DeviceOp` to `inner` through `intercept(_:_:)` as its `kind`, with its `detail`.
    open func run<Op: DeviceOp>(_ op: Op) throws -> Op.Result {
        try intercept(BackendCall(Op.kind, { op.detail })) { try inner.run(op) }
    }
}

extension Backend {
    /// The backend under any forwarding wrappers (measuring, failing, ...).
    package var innermost: Backend {
        var b: Backend = self
        while let f = b as? ForwardingBackend { b = f.inner }
        return b
    }
}
