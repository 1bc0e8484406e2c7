import Foundation
import Updraft
import UpdraftCommandLine

/// `updraft-bench chain`: how the passes over a model grow with its length, on a chain of ReLUs
/// between two updatable inner products (`ChainModel`). Every pass should be linear: doubling the
/// layers doubles the time.
let chainCommand = CLICommand(CommandSpec(
    name: "chain",
    summary: "time reading, validating, planning and training models of N chained layers",
    options: OptionSpec.table("""
        --layers N,N,...    ReLU layers in the chain (default 25000,50000,100000,200000)
        --no-train          skip the training epoch (8 examples, batch 4, CPU backend)
        --out FILE.mlmodel  also write the longest model here (for `updraft inspect`)
        """)
)) { args in
    let sizes = try (args.value("layers") ?? "25000,50000,100000,200000").split(separator: ",").map { part -> Int in
        guard let n = Int(part), n >= 0 else { throw UsageError("--layers takes counts like 25000,50000; got '\(part)'") }
        return n
    }
    print(formatTable([["layers", "build s", "write s", "read s", "inspect s", "plan s", "train epoch s"]]), terminator: "")
    for n in sizes {
        func time<T>(_ body: () throws -> T) rethrows -> (T, Double) {
            let start = Date()
            let value = try body()
            return (value, Date().timeIntervalSince(start))
        }
        let (model, build) = try time { try ChainModel.make(reLUs: n) }
        let url = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("updraft-chain-\(n).mlmodel")
        defer { try? FileManager.default.removeItem(at: url) }
        let (_, write) = try time { try model.write(to: url) }
        let (read, readTime) = try time { try CoreMLModel(contentsOf: url) }
        let (report, inspect) = time { ModelReport(model: read, file: url.path) }
        if let problem = report.findings.first(where: { $0.severity == "error" }) {
            throw UpdraftError(.invalidModel, "the \(n)-layer chain is reported invalid: \(problem.message)")
        }
        let host = DeviceProfile(name: "host", kind: .cpu, openCLIndex: nil, fmaGFLOPS: 10, bandwidthGBps: 10,
                                 launchLatencyMicroseconds: 1, memoryBytes: HostInfo.current.memoryBytes, transferGBps: 10)
        let (_, plan) = try time {
            try Scheduler.plan(graph: try NetworkGraph(model: read), batchSize: 4, computeUnits: .cpuOnly, devices: [host])
        }
        var train = "-"
        if !args.flag("no-train") {
            let examples = (0..<8).map { i in
                TrainingExample(input: Tensor(shape: [8, 1, 1], uniformIn: -1...1, seed: UInt64(i)), target: .classIndex(i % 3))
            }
            var config = UpdateConfiguration()
            let cpu = CPUBackend()
            config.placement.backends = (cpu, cpu)
            let task = UpdateTask(model: read, trainingData: try ArrayBatchProvider(examples: examples), configuration: config)
            let (context, seconds) = time { task.run() }
            if let error = context.error { throw error }
            train = String(format: "%.2f", seconds)
        }
        if n == sizes.max(), let out = args.value("out") { try read.write(to: URL(fileURLWithPath: out)) }
        print(formatTable([["layers", "build s", "write s", "read s", "inspect s", "plan s", "train epoch s"],
                           ["\(n)"] + [build, write, readTime, inspect, plan].map { String(format: "%.2f", $0) } + [train]])
                .split(separator: "\n").last.map(String.init) ?? "")
        StandardOutput.flush()
    }
    return 0
}
