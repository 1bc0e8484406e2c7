import UpdraftCore

// The activation (field 130) and unary-function (field 220) layers as one unit on the model side:
// their parameters, decoders and encoders, and shape rules (both run as `LayerOp.activation`). The
// device side: Backends/DeviceOps+Layers.swift; the executor's kind: Layers/ActivationLayer.swift;
// the functions themselves: Ops/Activation.swift (and the `ActivationTable` the kernels read).

/// ActivationParams: the oneof case's name and, for the ones Updraft runs, the activation.
public struct ActivationLayerParams: Hashable, Sendable {
    /// The ActivationParams oneof field name (e.g. `ReLU`, `sigmoid`).
    public var typeName: String
    /// The ActivationParams oneof field number (0 when built from a clip or unary function).
    public var typeField: Int
    /// The activation Updraft runs; nil for a type it cannot.
    public var activation: Activation?

    /// An ActivationParams case; clip and unary functions are layers of their own (`LayerParams.clip`,
    /// `.unary`) and read here as unsupported.
    public init(_ activation: Activation) {
        self.activation = activation
        let type: ActivationParamsType?
        switch activation {
        case .linear: type = .linear
        case .relu: type = .ReLU
        case .leakyReLU: type = .leakyReLU
        case .thresholdedReLU: type = .thresholdedReLU
        case .prelu: type = .PReLU
        case .tanh: type = .tanh
        case .scaledTanh: type = .scaledTanh
        case .sigmoid: type = .sigmoid
        case .sigmoidHard: type = .sigmoidHard
        case .elu: type = .ELU
        case .softsign: type = .softsign
        case .softplus: type = .softplus
        case .parametricSoftplus: type = .parametricSoftplus
        case .clip, .unary: type = nil; self.activation = nil
        }
        typeField = type?.rawValue ?? 0
        typeName = type?.name ?? "\(activation) (not an ActivationParams case)"
    }

    /// An activation Updraft cannot run, identified by its oneof name and field number.
    public init(unsupported typeName: String, field: Int) {
        self.typeName = typeName; self.typeField = field; self.activation = nil
    }
}

extension ActivationLayerParams {
    init(reading r: ProtoReader) throws {
        guard let f = r.message.fields.last else {
            self.init(unsupported: "no activation type", field: 0)
            return
        }
        let type = ActivationParamsType(rawValue: f.number)
        let name = type?.name ?? "activation type \(f.number)"
        let m = try r.child(f, named: name)
        func float(_ n: Int, _ what: String) throws -> Float { try m.float(n, what) ?? 0 }
        /// The float values of a WeightParams field; nil (unsupported) when quantized.
        func weights(_ n: Int, _ what: String) throws -> [Float]? {
            let w = try m.message(n, what).map(WeightParams.init(reading:)) ?? .empty
            return w.isReadable ? w.values : nil
        }
        switch type {
        case .linear?: self.init(.linear(alpha: try float(1, "alpha"), beta: try float(2, "beta")))
        case .ReLU?: self.init(.relu)
        case .leakyReLU?: self.init(.leakyReLU(alpha: try float(1, "alpha")))
        case .thresholdedReLU?: self.init(.thresholdedReLU(alpha: try float(1, "alpha")))
        case .PReLU?:
            guard let alpha = try weights(1, "alpha") else { self.init(unsupported: "\(name) with quantized alpha", field: f.number); return }
            self.init(.prelu(alpha: alpha))
        case .tanh?: self.init(.tanh)
        case .scaledTanh?: self.init(.scaledTanh(alpha: try float(1, "alpha"), beta: try float(2, "beta")))
        case .sigmoid?: self.init(.sigmoid)
        case .sigmoidHard?: self.init(.sigmoidHard(alpha: try float(1, "alpha"), beta: try float(2, "beta")))
        case .ELU?: self.init(.elu(alpha: try float(1, "alpha")))
        case .softsign?: self.init(.softsign)
        case .softplus?: self.init(.softplus)
        case .parametricSoftplus?:
            guard let alpha = try weights(1, "alpha"), let beta = try weights(2, "beta") else {
                self.init(unsupported: "\(name) with quantized alpha or beta", field: f.number); return
            }
            self.init(.parametricSoftplus(alpha: alpha, beta: beta))
        case nil:
            self.init(unsupported: name, field: f.number)
        }
    }

    func encoded(into w: inout MessageWriter) {
        let field = typeField
        switch activation {
        case .relu?, .tanh?, .sigmoid?, .softsign?, .softplus?: w.message(field, ProtoMessage())
        case let .leakyReLU(alpha)?, let .thresholdedReLU(alpha)?, let .elu(alpha)?:
            w.message(field) { m in m.float(1, alpha) }
        case let .linear(alpha, beta)?, let .scaledTanh(alpha, beta)?, let .sigmoidHard(alpha, beta)?:
            w.message(field) { m in m.float(1, alpha); m.float(2, beta) }
        case let .prelu(alpha)?: w.message(field) { m in m.message(1, WeightParams(values: alpha).encoded()) }
        case let .parametricSoftplus(alpha, beta)?:
            w.message(field) { m in
                m.message(1, WeightParams(values: alpha).encoded())
                m.message(2, WeightParams(values: beta).encoded())
            }
        case .clip?, .unary?, nil: if field > 0 { w.message(field, ProtoMessage()) }
        }
    }
}


extension ActivationLayerParams: LayerShapeRule {
    /// One input, the same shape out; every ActivationParams case Updraft reads (per-channel
    /// constants checked against the input's channels).
    func inferred(_ c: ShapeRuleContext) throws -> InferredLayer {
        try c.expectInputs(1...1)
        guard let activation else {
            throw c.fail("activation \(typeName) (ActivationParams field \(typeField)) is not supported",
                         hint: "Updraft runs every ActivationParams case with float32 or float16 constants", kind: .unsupported)
        }
        return InferredLayer(op: .activation(try c.elementwiseFunction(activation)), output: c.input)
    }
}

extension UnaryFunctionLayerParams: LayerShapeRule {
    /// One input, the same shape out; the operation codes NeuralNetwork.proto defines.
    func inferred(_ c: ShapeRuleContext) throws -> InferredLayer {
        try c.expectInputs(1...1)
        guard let f = function else {
            throw c.fail("unary function type \(type) is not one of NeuralNetwork.proto's (0 SQRT … 7 THRESHOLD)",
                         hint: "use SQRT, RSQRT, INVERSE, POWER, EXP, LOG, ABS or THRESHOLD", kind: .unsupported)
        }
        return InferredLayer(op: .activation(try c.elementwiseFunction(.unary(f))), output: c.input)
    }
}

/// UnaryFunctionLayerParams as stored (epilogue defaults not applied): `function` is nil for an
/// operation code NeuralNetwork.proto does not define.
public struct UnaryFunctionLayerParams: Hashable, Sendable {
    /// UnaryFunctionLayerParams.type: the Operation code (SQRT 0, RSQRT 1, INVERSE 2, POWER 3, EXP 4, LOG 5, ABS 6, THRESHOLD 7).
    public var type: Int32
    /// UnaryFunctionLayerParams.alpha: the exponent (POWER) or threshold (THRESHOLD).
    public var alpha: Float
    /// UnaryFunctionLayerParams.epsilon as stored (0 means Core ML's 1e-6).
    public var epsilon: Float
    /// UnaryFunctionLayerParams.shift, added to x before the function.
    public var shift: Float
    /// UnaryFunctionLayerParams.scale as stored (0 means Core ML's 1), multiplied with x before the function.
    public var scale: Float

    /// Stored values; zeros mean "use Core ML's default" where the proto says so.
    public init(type: Int32, alpha: Float = 0, epsilon: Float = 0, shift: Float = 0, scale: Float = 0) {
        self.type = type; self.alpha = alpha; self.epsilon = epsilon; self.shift = shift; self.scale = scale
    }

    /// The stored form of `f`.
    public init(_ f: UnaryFunction) {
        self.init(type: f.operation.rawValue, alpha: f.alpha, epsilon: f.epsilon, shift: f.shift, scale: f.scale)
    }

    /// The function with NeuralNetwork.proto's defaults (epsilon 0 -> 1e-6, scale 0 -> 1).
    public var function: UnaryFunction? {
        UnaryFunction.Operation(rawValue: type).map { UnaryFunction($0, alpha: alpha, epsilon: epsilon, shift: shift, scale: scale) }
    }
}

extension UnaryFunctionLayerParams {
    init(reading r: ProtoReader) throws {
        self.init(type: try r.int32(1, "type") ?? 0, alpha: try r.float(2, "alpha") ?? 0, epsilon: try r.float(3, "epsilon") ?? 0,
                  shift: try r.float(4, "shift") ?? 0, scale: try r.float(5, "scale") ?? 0)
    }

    func encoded(into w: inout MessageWriter) {
        w.int32(1, type)
        w.float(2, alpha)
        w.float(3, epsilon)
        w.float(4, shift)
        w.float(5, scale)
    }
}
