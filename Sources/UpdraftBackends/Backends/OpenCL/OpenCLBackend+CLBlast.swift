import CCLBlast
import COpenCL
import UpdraftCore

/// CLBlast (libclblast) as a second GEMM engine: it runs on the backend's own queue and buffers (no
/// copies), for the plain GEMMs, the pointwise convolutions forward and backward data and the
/// ungrouped convolutions' weight gradients (grouped ones stay in-house), wherever
/// the tuning (`updraft tune`) found it faster than the in-house kernels. CLBlast has no fused
/// epilogue: a bias or activation is one more pass (`gemm_epilogue` in Kernels/gemm_reduce.cl), which the
/// tuner's timings include. A call CLBlast refuses falls back to the in-house kernel, and that shape
/// class is not offered to CLBlast again on this backend.
extension OpenCLBackend {
    /// Runs `op` with CLBlast; false (after noting why) when CLBlast cannot, so the caller runs the
    /// in-house kernel instead. `op` has been validated against the buffers.
    func clblastGemm(_ op: GemmOperation, a A: OpenCLBuffer, b B: OpenCLBuffer, c C: OpenCLBuffer,
                     bias: OpenCLBuffer?, shape: KernelShape) throws -> Bool {
        guard op.m > 0, op.n > 0, op.k > 0, op.batch > 0,
              gemmWorkspace.clblastRefusals[shape.classKey] == nil else { return false }
        var queue: cl_command_queue? = context.queue
        var event: cl_event? = nil
        let ta = op.transA ? CLBlastTransposeYes : CLBlastTransposeNo
        let tb = op.transB ? CLBlastTransposeYes : CLBlastTransposeNo
        let status: CLBlastStatusCode
        if op.batch == 1 {
            status = CLBlastSgemm(CLBlastLayoutRowMajor, ta, tb, op.m, op.n, op.k, op.alpha,
                                  A.mem, op.offsetA, op.lda, B.mem, op.offsetB, op.ldb, op.beta,
                                  C.mem, op.offsetC, op.ldc, &queue, &event)
        } else {
            status = CLBlastSgemmStridedBatched(CLBlastLayoutRowMajor, ta, tb, op.m, op.n, op.k, op.alpha,
                                                A.mem, op.offsetA, op.lda, op.strideA, B.mem, op.offsetB, op.ldb, op.strideB,
                                                op.beta, C.mem, op.offsetC, op.ldc, op.strideC, op.batch, &queue, &event)
        }
        guard status == CLBlastSuccess else {
            if let event { clReleaseEvent(event) }
            gemmWorkspace.clblastRefusals[shape.classKey] = "CLBlast \(op.batch == 1 ? "SGEMM" : "strided batched SGEMM") "
                + "\(op.m)x\(op.n)x\(op.k) (batch \(op.batch)) returned \(Self.clblastStatusName(status))"
            return false
        }
        if let event {
            let e = OpenCLEvent(event)
            if gemmWorkspace.records != nil {
                gemmWorkspace.records?.append(OpenCLLaunchRecord(kernel: "clblast_sgemm", defines: ["ENGINE": "CLBlast"],
                                                                 global: [op.m, op.n, op.batch], local: [], event: e))
            }
        }
        if op.bias != .none || op.activation != nil {
            try gemmEpilogue(C, offset: op.offsetC, rows: op.m, columns: op.n, ld: op.ldc, stride: op.strideC,
                             batch: op.batch, bias: bias, perRow: op.bias == .perRow, activation: op.activation,
                             activationPerRow: op.activationPerRow)
        }
        return true
    }

    /// C[offset + b * stride + i * ld + j] = f(C + bias[i or j]): the bias and activation CLBlast
    /// cannot fuse, one pass over the output (per-channel constants by i when `activationPerRow`, else j).
    func gemmEpilogue(_ c: OpenCLBuffer, offset: Int, rows: Int, columns: Int, ld: Int, stride: Int, batch: Int,
                      bias: OpenCLBuffer?, perRow: Bool, activation: Activation?, activationPerRow: Bool) throws {
        let mode = bias == nil ? 0 : perRow ? 1 : 2
        let local = [min(64, max(1, columns)), 1, 1]
        let (arguments, table) = try activationArguments(activation, channels: activationPerRow ? rows : columns, placeholder: c)
        try enqueue(try opsKernel("gemm_reduce.cl", "gemm_epilogue"),
                    [.buffer(c), .int(offset), .int(rows), .int(columns), .int(ld), .int(stride), .int(batch),
                     .buffer(bias ?? c), .int(mode), .int(activationPerRow ? 1 : 0)] + arguments,
                    global: [columns, rows, batch], local: local, defines: ["WG_SIZE": "\(reductionGroupSize)"], holding: table)
    }

    /// A pointwise, ungrouped convolution forward as CLBlast's batched GEMM: y_n = W . x_n (+ b, then the activation).
    func clblastConvolutionForward(_ g: ConvGeometry, x: OpenCLBuffer, w: OpenCLBuffer, b: OpenCLBuffer?, y: OpenCLBuffer,
                                   channelOffset: Int, outputChannels: Int, epilogue: Activation?, shape: KernelShape) throws -> Bool {
        let plane = g.outHeight * g.outWidth
        var op = GemmOperation(m: g.outChannels, n: plane, k: g.inChannels, batch: g.batch)
        op.strideA = 0
        op.strideB = g.inChannels * plane
        op.offsetC = channelOffset * plane
        op.strideC = outputChannels * plane
        op.bias = b == nil ? .none : .perRow
        op.activation = epilogue
        op.activationPerRow = true
        return try clblastGemm(op, a: w, b: x, c: y, bias: b, shape: shape)
    }

    /// A pointwise, ungrouped convolution's input gradient as CLBlast's batched GEMM: dx_n = W^T . dy_n.
    func clblastConvolutionBackwardData(_ g: ConvGeometry, dy: OpenCLBuffer, w: OpenCLBuffer, dx: OpenCLBuffer,
                                        shape: KernelShape) throws -> Bool {
        let plane = g.inHeight * g.inWidth
        var op = GemmOperation(m: g.inChannels, n: plane, k: g.outChannels, transA: true, batch: g.batch)
        op.strideA = 0
        op.strideB = g.outChannels * plane
        op.strideC = g.inChannels * plane
        return try clblastGemm(op, a: w, b: dy, c: dx, bias: nil, shape: shape)
    }

    /// CLBlast's name for a status code (clblast_c.h), with the number.
    static func clblastStatusName(_ status: CLBlastStatusCode) -> String {
        let names: [Int32: String] = [
            -3: "OpenCL compiler not available", -4: "temp buffer alloc failure", -5: "OpenCL out of resources", -6: "OpenCL out of host memory",
            -11: "OpenCL build failure", -30: "invalid value", -36: "invalid command queue", -38: "invalid mem object",
            -42: "invalid binary", -43: "invalid build options", -44: "invalid program", -45: "invalid program executable",
            -46: "invalid kernel name", -47: "invalid kernel definition", -48: "invalid kernel", -49: "invalid arg index",
            -50: "invalid arg value", -51: "invalid arg size", -52: "invalid kernel args", -53: "invalid local num dimensions",
            -54: "invalid local threads total", -55: "invalid local threads dim", -56: "invalid global offset", -57: "invalid event wait list",
            -58: "invalid event", -59: "invalid operation", -61: "invalid buffer size", -63: "invalid global work size",
            -1024: "not implemented", -1022: "invalid matrix a", -1021: "invalid matrix b", -1020: "invalid matrix c",
            -1019: "invalid vector x", -1018: "invalid vector y", -1017: "invalid dimension", -1016: "invalid lead dim a",
            -1015: "invalid lead dim b", -1014: "invalid lead dim c", -1013: "invalid increment x", -1012: "invalid increment y",
            -1011: "insufficient memory a", -1010: "insufficient memory b", -1009: "insufficient memory c", -1008: "insufficient memory x",
            -1007: "insufficient memory y", -2050: "insufficient memory temp", -2049: "invalid batch count", -2048: "invalid override kernel",
            -2047: "missing override parameter", -2046: "invalid local mem usage", -2045: "no half precision", -2044: "no double precision",
            -2043: "invalid vector scalar", -2042: "insufficient memory scalar", -2041: "database error", -2040: "unknown error",
            -2039: "unexpected error",
        ]
        let code = Int32(status.rawValue)
        return "\(names[code] ?? "error") (\(code))"
    }
}
