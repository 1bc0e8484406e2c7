import Foundation
import PackagePlugin

/// Turns every file in the package's `Kernels/` folder into one generated Swift source holding the
/// OpenCL C text as string constants, so that the `updraft` executable needs no source tree at run time;
/// and records the git revision the library is built from (for `updraft --version`).
/// Each goes to the one target that uses it: the kernels to UpdraftBackends (OpenCLContext,
/// KernelTuningStore), the revision to UpdraftCore (Support/Version.swift).
@main
struct EmbedKernels: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let kernels = context.package.directoryURL.appendingPathComponent("Kernels")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: kernels.path)) ?? []
        let inputs = names.filter { $0.hasSuffix(".cl") || $0.hasSuffix(".h") }.sorted()
            .map { kernels.appendingPathComponent($0) }
        let output = context.pluginWorkDirectoryURL.appendingPathComponent("EmbeddedKernels.swift")
        let buildInfo = context.pluginWorkDirectoryURL.appendingPathComponent("EmbeddedBuildInfo.swift")
        let git = GitFiles(package: context.package.directoryURL)
        let kernelsCommand: Command =
            .buildCommand(
                displayName: "Embedding \(inputs.count) OpenCL sources from Kernels/",
                executable: try context.tool(named: "embed-kernels").url,
                arguments: [output.path] + inputs.map(\.path),
                inputFiles: inputs,
                outputFiles: [output])
        // Re-run whenever HEAD moves: HEAD itself and the files its ref may live in are inputs.
        let buildInfoCommand: Command =
            .buildCommand(
                displayName: "Recording the git revision",
                executable: try context.tool(named: "embed-kernels").url,
                arguments: ["--build-info", buildInfo.path] + git.arguments,
                inputFiles: git.inputs,
                outputFiles: [buildInfo])
        switch target.name {
        case "UpdraftBackends": return [kernelsCommand]
        case "UpdraftCore": return [buildInfoCommand]
        default: return [kernelsCommand, buildInfoCommand]
        }
    }
}

/// Where a checkout keeps HEAD and its refs: `.git/` in a clone; for a worktree, `.git` is a file
/// naming its git dir, whose `commondir` holds the shared refs. Nothing when the tree has no git.
struct GitFiles {
    var gitDir: URL?
    var commonDir: URL?

    init(package: URL) {
        let dotGit = package.appendingPathComponent(".git")
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: dotGit.path, isDirectory: &isDirectory) else { return }
        if isDirectory.boolValue {
            gitDir = dotGit
        } else if let text = try? String(contentsOf: dotGit, encoding: .utf8), text.hasPrefix("gitdir:") {
            let path = text.dropFirst("gitdir:".count).trimmingCharacters(in: .whitespacesAndNewlines)
            gitDir = path.hasPrefix("/") ? URL(fileURLWithPath: path) : package.appendingPathComponent(path)
        }
        guard let gitDir else { return }
        commonDir = gitDir
        if let common = try? String(contentsOf: gitDir.appendingPathComponent("commondir"), encoding: .utf8) {
            let path = common.trimmingCharacters(in: .whitespacesAndNewlines)
            commonDir = path.hasPrefix("/") ? URL(fileURLWithPath: path)
                : gitDir.appendingPathComponent(path).standardizedFileURL
        }
    }

    var arguments: [String] { gitDir.map { [$0.path, commonDir!.path] } ?? [] }

    var inputs: [URL] {
        guard let gitDir, let commonDir else { return [] }
        var files = [gitDir.appendingPathComponent("HEAD"), commonDir.appendingPathComponent("packed-refs")]
        if let head = try? String(contentsOf: gitDir.appendingPathComponent("HEAD"), encoding: .utf8),
           head.hasPrefix("ref:") {
            let ref = head.dropFirst(4).trimmingCharacters(in: .whitespacesAndNewlines)
            files.append(commonDir.appendingPathComponent(ref))
        }
        return files.filter { FileManager.default.fileExists(atPath: $0.path) }
    }
}
