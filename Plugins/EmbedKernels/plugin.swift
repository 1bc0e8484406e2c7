import Foundation
import PackagePlugin

/// Turns every file in the package's `Kernels/` folder into one generated Swift source holding the
/// OpenCL C text as string constants, so that the `updraft` executable needs no source tree at run time.
@main
struct EmbedKernels: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let kernels = context.package.directoryURL.appendingPathComponent("Kernels")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: kernels.path)) ?? []
        let inputs = names.filter { $0.hasSuffix(".cl") || $0.hasSuffix(".h") }.sorted()
            .map { kernels.appendingPathComponent($0) }
        let output = context.pluginWorkDirectoryURL.appendingPathComponent("EmbeddedKernels.swift")
        return [.buildCommand(
            displayName: "Embedding \(inputs.count) OpenCL sources from Kernels/",
            executable: try context.tool(named: "embed-kernels").url,
            arguments: [output.path] + inputs.map(\.path),
            inputFiles: inputs,
            outputFiles: [output])]
    }
}
