import Foundation
import XCTest
import Updraft

/// The README's "From Swift" example, run as written (on a small SqueezeNet and a few bundled
/// digits), and checked to be the README's text line for line.
final class ReadmeExampleTests: XCTestCase {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    /// The README's example, as in the README (indented into this function).
    private func readmeExample() throws -> [String] {
        let printed = Locked<[String]>([])
        @Sendable func print(_ line: String) { printed.append(line) }
        // README example begins
        let model = try CoreMLModel(contentsOf: URL(fileURLWithPath: "SqueezeNet.mlmodel"))
        let data = try ModelDataset(model: model, path: URL(fileURLWithPath: "train")).provider
        var config = UpdateConfiguration()
        config.placement.computeUnits = .all   // as MLModelConfiguration.computeUnits: the scheduler picks the devices
        config.parameters = [.learningRate: .double(0.01), .epochs: .int(10)]
        let task = UpdateTask(model: model, trainingData: data, configuration: config, handlers: UpdateHandlers(
            events: [.epochEnd],
            progress: { context in
                guard let metrics = context.metrics else { return }
                print("epoch \(metrics.epochIndex + 1): loss \(metrics.meanLoss ?? metrics.lossValue) on \(metrics.device ?? "?")")
                // Anneal the learning rate once an epoch, as with Core ML's resume(withParameters:).
                do {
                    try context.task.resume(withParameters: [.learningRate: .double(context.parameters.learningRate * 0.9)])
                } catch {
                    print("learning rate unchanged: \(error)")   // e.g. outside the model's allowed range
                }
            },
            completion: { context in
                if let error = context.error { print("training failed: \(error)"); return }
                do { try context.task.write(to: URL(fileURLWithPath: "Trained.mlmodel")) } catch { print("cannot save: \(error)") }
            }))
        task.resume()   // trains on a background thread; task.cancel() still delivers the model trained so far
        task.wait()
        // README example ends
        return printed.value
    }

    func testTheExampleRunsAsWrittenAndAnnealsOncePerEpoch() throws {
        let fm = FileManager.default
        let dir = fm.temporaryDirectory.appendingPathComponent("readme-\(UUID().uuidString)")
        try fm.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? fm.removeItem(at: dir) }
        var options = SqueezeNet.Options(labels: (0..<10).map(String.init))
        options.inputSize = 48
        try SqueezeNet.build(options).write(to: dir.appendingPathComponent("SqueezeNet.mlmodel"))
        // Three digits of each class.
        let digits = Self.packageRoot.appendingPathComponent("Tests/Data/digits/validation")
        for label in 0..<10 {
            let source = digits.appendingPathComponent("\(label)")
            let target = dir.appendingPathComponent("train/\(label)")
            try fm.createDirectory(at: target, withIntermediateDirectories: true)
            for name in try fm.contentsOfDirectory(atPath: source.path).sorted().prefix(3) {
                try fm.copyItem(at: source.appendingPathComponent(name), to: target.appendingPathComponent(name))
            }
        }
        let previous = fm.currentDirectoryPath
        XCTAssertTrue(fm.changeCurrentDirectoryPath(dir.path))
        defer { _ = fm.changeCurrentDirectoryPath(previous) }
        let printed = try readmeExample()
        XCTAssertEqual(printed.count, 10, "one line per epoch, no rejected annealing: \(printed)")
        XCTAssertTrue(printed.allSatisfy { $0.hasPrefix("epoch ") && !$0.hasSuffix("on reference") }, "\(printed)")
        let trained = try CoreMLModel(contentsOf: dir.appendingPathComponent("Trained.mlmodel"))
        XCTAssertEqual(trained.updatableLayerNames, ["conv10", "fullyconnected0"])
        XCTAssertTrue(fm.fileExists(atPath: dir.appendingPathComponent("Trained.history.json").path))
    }

    /// The first swift code block of README.md's "From Swift" section, without its fences.
    private func readmeSwiftBlock() throws -> Substring {
        let readme = try String(contentsOf: Self.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let section = try XCTUnwrap(readme.range(of: "## From Swift"), "README has a From Swift section")
        let rest = readme[section.upperBound...]
        let start = try XCTUnwrap(rest.range(of: "```swift\n"))
        let end = try XCTUnwrap(rest[start.upperBound...].range(of: "```"))
        return rest[start.upperBound..<end.lowerBound]
    }

    /// Examples/FineTune (built and run in Swift 6 mode by `make example`) holds the README's example verbatim.
    func testTheExamplePackageHoldsTheReadmeExample() throws {
        let example = try String(contentsOf: Self.packageRoot.appendingPathComponent("Examples/FineTune/Sources/FineTune/main.swift"),
                                 encoding: .utf8)
        XCTAssertEqual(example, String(try readmeSwiftBlock()),
                       "Examples/FineTune/Sources/FineTune/main.swift must be README.md's From Swift example, verbatim")
    }

    func testTheReadmeShowsThisExampleLineForLine() throws {
        let block = try readmeSwiftBlock().split(separator: "\n", omittingEmptySubsequences: false)
            .map(String.init).filter { !$0.hasPrefix("import ") && !$0.isEmpty }
        let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
            .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let begin = try XCTUnwrap(source.firstIndex { $0.hasSuffix("// README example begins") })
        let finish = try XCTUnwrap(source.firstIndex { $0.hasSuffix("// README example ends") })
        let example = source[(begin + 1)..<finish].map { $0.hasPrefix("        ") ? String($0.dropFirst(8)) : $0 }
        XCTAssertEqual(block, Array(example), "README.md's From Swift example and this test's copy differ")
    }
}
