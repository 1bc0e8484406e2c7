// Activations, clip and unary functions (Kernels/activation.cl), and the kernel arguments of any
// activation fused as an epilogue (ACT_PARAMS in Kernels/activation.h): one work-item per element.
import UpdraftCore

extension OpenCLBackend {
    /// The ACT_PARAMS arguments for `a` (nil: no epilogue) over `channels` channels, and the buffer of
    /// per-channel constants made for them (the caller holds it until its kernel ran). `placeholder`
    /// fills the table slot when there is none.
    func activationArguments(_ a: Activation?, channels: Int, placeholder: OpenCLBuffer) throws
        -> (arguments: [KernelArgument], table: OpenCLBuffer?) {
        guard let a else {
            return ([.int(Int(ActivationKind.noneCode)), .float(0), .float(0), .float(0), .float(0), .buffer(placeholder), .int(0)], nil)
        }
        try a.validate(channels: channels)
        let s = a.scalars
        var table: OpenCLBuffer? = nil
        if let constants = try a.channelConstants(channels: channels) {
            table = try constants.withUnsafeBytes { raw in
                try OpenCLBuffer(context: context, count: constants.count, initial: raw.baseAddress)
            }
        }
        return ([.int(Int(a.kind.rawValue)), .float(s.a), .float(s.b), .float(s.c), .float(s.d),
                 .buffer(table ?? placeholder), .int(table == nil ? 0 : channels)], table)
    }

    /// The kernel `name` of activation.cl (built, like every program, with the table's defines).
    private func activationKernel(_ name: String) throws -> OpenCLKernel { try opsKernel("activation.cl", name) }

    /// One work-item per element (activation.cl); per-channel constants go to the device in a buffer held until the kernel ran.
    public func activationForward(_ a: Activation, _ g: ActivationGeometry, input: DeviceBuffer, output: DeviceBuffer) throws {
        try requireSizes([("batch", g.batch), ("channels", g.channels), ("spatial size", g.spatial)], total: g.count,
                         op: "activation \(a)")
        let x = try operand(input, holds: g.count, "activation input")
        let y = try operand(output, holds: g.count, "activation output")
        let (args, table) = try activationArguments(a, channels: g.channels, placeholder: x)
        guard g.count > 0 else { return }
        try launch(try activationKernel("activation_forward"), [.buffer(x), .buffer(y), .int(g.count), .int(max(g.spatial, 1))] + args,
                   count: g.count, holding: table)
    }

    /// One work-item per element; the kernel reads the input or the output, whichever the kind's derivative needs.
    public func activationBackward(_ a: Activation, _ g: ActivationGeometry, input: DeviceBuffer, output: DeviceBuffer,
                                   outputGradient: DeviceBuffer, inputGradient: DeviceBuffer) throws {
        try requireSizes([("batch", g.batch), ("channels", g.channels), ("spatial size", g.spatial)], total: g.count,
                         op: "activation \(a) backward")
        let fromOutput = a.backwardReadsOutput
        let v = fromOutput ? try operand(output, holds: g.count, "activation output")
                           : try operand(input, holds: g.count, "activation input")
        let dy = try operand(outputGradient, holds: g.count, "activation output gradient")
        let dx = try operand(inputGradient, holds: g.count, "activation input gradient")
        let (args, table) = try activationArguments(a, channels: g.channels, placeholder: v)
        guard g.count > 0 else { return }
        try launch(try activationKernel("activation_backward"),
                   [.buffer(v), .buffer(dy), .buffer(dx), .int(g.count), .int(max(g.spatial, 1)), .int(fromOutput ? 1 : 0)] + args,
                   count: g.count, holding: table)
    }

    /// `launchElementwise` that keeps `holding` (per-channel constants) until the kernel ran.
    private func launch(_ k: OpenCLKernel, _ arguments: [KernelArgument], count: Int, holding: OpenCLBuffer?) throws {
        try k.setArguments(arguments)
        guard let holding else { return try launchElementwise(k, count: count) }
        let local = max(1, min(tuning.workGroupSize, k.maxWorkGroupSize))
        let event = try k.launch(global: [count], local: [local], profile: true)
        try inFlight.hold(holding, until: event, context: context)
    }
}
