import Foundation
import XCTest
import UpdraftCommandLine
@testable import UpdraftCore

/// The shared command-line layer: help on every subcommand, the version with its git revision.
final class CommandLineTests: XCTestCase {
    let spec = CommandSpec(name: "demo", summary: "a demo", positionals: "FILE", minPositionals: 1, maxPositionals: 1,
                           options: [OptionSpec("count", value: "N", help: "how many")])

    func testDashHAndDashDashHelpAskForHelpWithoutOtherArguments() throws {
        XCTAssertTrue(try ParsedArguments(["-h"], spec: spec).helpRequested)
        XCTAssertTrue(try ParsedArguments(["--help"], spec: spec).helpRequested)
        XCTAssertTrue(try ParsedArguments(["x", "--count", "3", "-h"], spec: spec).helpRequested)
        XCTAssertFalse(try ParsedArguments(["--", "-h"], spec: spec).helpRequested, "after -- it is a file name")
        XCTAssertThrowsError(try ParsedArguments(["-x"], spec: spec))
        XCTAssertTrue(spec.usage(program: "p").contains("-h"))
    }

    func testAnOptionTableReadsAsTheHelpPrintsIt() throws {
        let table = OptionSpec.table("""
            --count N        how many (default \(3))

            --json           print JSON
            --tag A,B  with  labels, comma-separated
            """, repeatable: ["tag"])
        XCTAssertEqual(table.map(\.name), ["count", "json", "tag"])
        XCTAssertEqual(table.map(\.valueName), ["N", nil, "A,B"])
        XCTAssertEqual(table.map(\.help), ["how many (default 3)", "print JSON", "with  labels, comma-separated"],
                       "the first gap of two spaces ends the name and value; the help keeps the rest as written")
        XCTAssertEqual(table.map(\.repeatable), [false, false, true])
        let written = [OptionSpec("count", value: "N", help: "how many (default 3)"), OptionSpec("json", help: "print JSON"),
                       OptionSpec("tag", value: "A,B", help: "with  labels, comma-separated", repeatable: true)]
        XCTAssertEqual(CommandSpec(name: "demo", summary: "a demo", options: table).usage(program: "p"),
                       CommandSpec(name: "demo", summary: "a demo", options: written).usage(program: "p"))
        let parsed = try ParsedArguments(["--count", "4", "--json", "--tag", "a", "--tag", "b"],
                                         spec: CommandSpec(name: "demo", summary: "a demo", options: table))
        XCTAssertEqual(try parsed.int("count"), 4)
        XCTAssertTrue(parsed.flag("json"))
        XCTAssertEqual(parsed.all("tag"), ["a", "b"])
    }

    func testVersionCarriesTheGitCommitItWasBuiltFrom() throws {
        XCTAssertTrue(UpdraftVersion.version.split(separator: ".").count == 3
                      && UpdraftVersion.version.split(separator: ".").allSatisfy { Int($0) != nil },
                      "semantic version, got \(UpdraftVersion.version)")
        // The tests are built from a git checkout (a clone in CI): the revision is a commit of it.
        let revision = try XCTUnwrap(UpdraftVersion.revision, "built in a checkout, the revision is recorded")
        XCTAssertEqual(revision.count, 40)
        let git = Process()
        git.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        git.arguments = ["git", "-C", URL(fileURLWithPath: #filePath).deletingLastPathComponent().path,
                         "cat-file", "-e", "\(revision)^{commit}"]
        try git.run(); git.waitUntilExit()
        XCTAssertEqual(git.terminationStatus, 0, "\(revision) is a commit of this repository")
        XCTAssertTrue(UpdraftVersion.description.hasPrefix("\(UpdraftVersion.version) (git \(revision.prefix(12)))"))
    }

    func testEverySubcommandAnswersDashHAndTheProgramItsVersion() throws {
        let cache = FileManager.default.temporaryDirectory.appendingPathComponent("cli-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: cache) }
        let overview = try runUpdraft(["--help"], cacheDirectory: cache)
        XCTAssertEqual(overview.status, 0)
        // The overview lists the subcommands, two spaces in, one a line.
        let names = overview.stdout.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("  "), !line.hasPrefix("   ") else { return nil }
            return line.split(separator: " ").first.map(String.init)
        }
        XCTAssertTrue(names.contains("train") && names.contains("plot"), overview.stdout)
        for name in names {
            let run = try runUpdraft([name, "-h"], cacheDirectory: cache)
            XCTAssertEqual(run.status, 0, "\(name) -h: \(run.stderr)")
            XCTAssertTrue(run.stdout.hasPrefix("usage: updraft \(name)"), "\(name) -h printed: \(run.stdout)")
        }
        let version = try runUpdraft(["--version"], cacheDirectory: cache)
        XCTAssertEqual(version.status, 0)
        XCTAssertEqual(version.stdout, "updraft \(UpdraftVersion.description)\n")
    }
}
