import Foundation

/// A small command-line parser for `updraft` and `updraft-bench`, kept out of the library's public API (SwiftPM here cannot fetch
/// swift-argument-parser). Options are `--name VALUE`, `--name=VALUE` or boolean `--flag`;
/// unknown options are errors that print the command's usage.
public struct OptionSpec: Sendable {
    public var name: String           // without the leading dashes
    public var valueName: String?     // nil for a boolean flag
    public var help: String
    public var repeatable: Bool
    public init(_ name: String, value: String? = nil, help: String, repeatable: Bool = false) {
        self.name = name; self.valueName = value; self.help = help; self.repeatable = repeatable
    }
}

extension OptionSpec {
    /// Options written as the help prints them, one a line: `--name  help` for a flag,
    /// `--name VALUE  help` for an option with a value (the value is one word; two or more spaces
    /// end it). Blank lines are skipped; `repeatable` names the options that may be given more than
    /// once. A line of another form is a programming error and stops the program, naming the line.
    public static func table(_ text: String, repeatable: Set<String> = []) -> [OptionSpec] {
        text.split(separator: "\n").compactMap { raw -> OptionSpec? in
            let line = raw.drop(while: { $0 == " " })
            if line.isEmpty { return nil }
            guard line.hasPrefix("--"), let gap = line.range(of: "  ") else {
                preconditionFailure("option table line '\(raw)' is not `--name [VALUE]  help`")
            }
            let head = line[line.index(line.startIndex, offsetBy: 2)..<gap.lowerBound]
            let help = line[gap.upperBound...].drop(while: { $0 == " " })
            let words = head.split(separator: " ")
            guard (1...2).contains(words.count), !help.isEmpty else {
                preconditionFailure("option table line '\(raw)' is not `--name [VALUE]  help`")
            }
            let name = String(words[0])
            return OptionSpec(name, value: words.count == 2 ? String(words[1]) : nil, help: String(help),
                              repeatable: repeatable.contains(name))
        }
    }
}

public struct CommandSpec: Sendable {
    public var name: String
    public var summary: String
    /// Positional arguments as shown in the usage line, e.g. "MODEL.mlmodel IMAGE...".
    public var positionals: String
    /// Smallest and largest number of positional arguments (nil: no limit).
    public var minPositionals: Int
    public var maxPositionals: Int?
    public var options: [OptionSpec]
    public var discussion: String

    public init(name: String, summary: String, positionals: String = "", minPositionals: Int = 0,
                maxPositionals: Int? = 0, options: [OptionSpec] = [], discussion: String = "") {
        self.name = name; self.summary = summary; self.positionals = positionals
        self.minPositionals = minPositionals; self.maxPositionals = maxPositionals
        self.options = options; self.discussion = discussion
    }

    public func usage(program: String) -> String {
        var s = "usage: \(program) \(name)"
        if !options.isEmpty { s += " [options]" }
        if !positionals.isEmpty { s += " \(positionals)" }
        s += "\n\n\(summary)\n"
        if !discussion.isEmpty { s += "\n\(discussion)\n" }
        let rows = options + [OptionSpec("help", help: "show this help (also -h)")]
        s += "\noptions:\n"
        let left = rows.map { "  --\($0.name)" + ($0.valueName.map { " \($0)" } ?? "") }
        let width = (left.map(\.count).max() ?? 0) + 2
        for (l, o) in zip(left, rows) {
            s += l.padding(toLength: width, withPad: " ", startingAt: 0) + o.help + "\n"
        }
        return s
    }
}

/// Thrown for bad command lines; the CLI prints the message and the usage, and exits with status 2.
public struct UsageError: Error, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

public struct ParsedArguments: Sendable {
    public var positionals: [String] = []
    public var values: [String: [String]] = [:]
    public var flags: Set<String> = []
    public var helpRequested = false

    public init(_ arguments: [String], spec: CommandSpec) throws {
        var i = 0
        var onlyPositionals = false
        while i < arguments.count {
            let arg = arguments[i]; i += 1
            if !onlyPositionals, arg == "-h" { helpRequested = true; continue }
            if onlyPositionals || !arg.hasPrefix("--") || arg == "-" {
                if arg.hasPrefix("-"), !onlyPositionals, arg != "-", Double(arg) == nil {
                    throw UsageError("unknown option '\(arg)'")
                }
                positionals.append(arg); continue
            }
            if arg == "--" { onlyPositionals = true; continue }
            var name = String(arg.dropFirst(2))
            var inlineValue: String? = nil
            if let eq = name.firstIndex(of: "=") {
                inlineValue = String(name[name.index(after: eq)...]); name = String(name[..<eq])
            }
            if name == "help" { helpRequested = true; continue }
            guard let option = spec.options.first(where: { $0.name == name }) else {
                throw UsageError("unknown option '--\(name)'")
            }
            if option.valueName == nil {
                guard inlineValue == nil else { throw UsageError("option '--\(name)' takes no value") }
                flags.insert(name); continue
            }
            let value: String
            if let v = inlineValue { value = v } else {
                guard i < arguments.count else { throw UsageError("option '--\(name)' needs a value \(option.valueName!)") }
                value = arguments[i]; i += 1
            }
            if !option.repeatable, values[name] != nil { throw UsageError("option '--\(name)' given twice") }
            values[name, default: []].append(value)
        }
        if helpRequested { return }
        if positionals.count < spec.minPositionals {
            throw UsageError(spec.positionals.isEmpty ? "missing arguments" : "missing arguments: expected \(spec.positionals)")
        }
        if let max = spec.maxPositionals, positionals.count > max {
            throw UsageError("unexpected argument '\(positionals[max])'")
        }
    }

    public func flag(_ name: String) -> Bool { flags.contains(name) }
    public func value(_ name: String) -> String? { values[name]?.last }
    public func all(_ name: String) -> [String] { values[name] ?? [] }

    public func int(_ name: String) throws -> Int? {
        guard let v = value(name) else { return nil }
        guard let i = Int(v) else { throw UsageError("option '--\(name)' expects an integer, got '\(v)'") }
        return i
    }
    public func double(_ name: String) throws -> Double? {
        guard let v = value(name) else { return nil }
        guard let d = Double(v), d.isFinite else { throw UsageError("option '--\(name)' expects a number, got '\(v)'") }
        return d
    }
    /// One of `choices`, or nil if absent.
    public func choice(_ name: String, _ choices: [String]) throws -> String? {
        guard let v = value(name) else { return nil }
        guard choices.contains(v) else {
            throw UsageError("option '--\(name)' must be one of \(choices.joined(separator: ", ")), got '\(v)'")
        }
        return v
    }
}

/// A subcommand of a multi-command executable.
public struct CLICommand: Sendable {
    public var spec: CommandSpec
    public var run: @Sendable (ParsedArguments) throws -> Int32
    public init(_ spec: CommandSpec, run: @escaping @Sendable (ParsedArguments) throws -> Int32) { self.spec = spec; self.run = run }
}

/// Dispatches `program COMMAND ARGS...`, printing usage for --help and for bad command lines, and a
/// clean message (never a stack trace) for thrown errors. Returns the process exit status.
/// `version`, when given, is printed by `--version` (and `version`).
public func runCommandLine(program: String, summary: String, commands: [CLICommand], arguments: [String],
                           version: String? = nil) -> Int32 {
    func overview() -> String {
        let width = (commands.map(\.spec.name.count).max() ?? 0) + 4
        var s = "\(summary)\n\nusage: \(program) COMMAND [options]\n\ncommands:\n"
        for c in commands { s += "  " + c.spec.name.padding(toLength: width, withPad: " ", startingAt: 0) + c.spec.summary + "\n" }
        s += "\nRun '\(program) COMMAND --help' for a command's options"
        s += version == nil ? ".\n" : ", '\(program) --version' for the version.\n"
        return s
    }
    guard let first = arguments.first else { printError(overview()); return 2 }
    if first == "--help" || first == "-h" || first == "help" { print(overview(), terminator: ""); return 0 }
    if let version, first == "--version" || first == "version" { print("\(program) \(version)"); return 0 }
    guard let command = commands.first(where: { $0.spec.name == first }) else {
        printError("\(program): unknown command '\(first)'\n\n" + overview()); return 2
    }
    do {
        let parsed = try ParsedArguments(Array(arguments.dropFirst()), spec: command.spec)
        if parsed.helpRequested { print(command.spec.usage(program: program), terminator: ""); return 0 }
        return try command.run(parsed)
    } catch let e as UsageError {
        printError("\(program) \(command.spec.name): \(e.message)\n\n" + command.spec.usage(program: program))
        return 2
    } catch {
        printError("\(program) \(command.spec.name): error: \(error)")
        return 1
    }
}

/// Writes a line to standard error.
public func printError(_ text: String) {
    var s = text
    if !s.hasSuffix("\n") { s += "\n" }
    FileHandle.standardError.write(Data(s.utf8))
}
