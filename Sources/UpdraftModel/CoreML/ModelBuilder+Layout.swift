/// ModelBuilder's layout layers (Layers+Layout.swift): reshapes, squeeze/expandDims, copy, transpose,
/// softmaxND and concatND, each shape-checked as it is added.
extension ModelBuilder {
    /// Adds a layout layer reading `inputs` (default: the last output).
    @discardableResult
    public mutating func layout(_ name: String, _ params: LayoutLayerParams, inputs: [String]? = nil,
                                output: String? = nil) throws -> String {
        try add(LayerSpec(name: name, inputs: inputs ?? [lastOutput], outputs: [output ?? name], params: .layout(params)))
    }

    /// Adds a reshapeStatic: the input's values, in order, in `targetShape` (same element count); returns the output blob's name.
    @discardableResult
    public mutating func reshapeStatic(_ name: String, targetShape: [Int], input: String? = nil, output: String? = nil) throws -> String {
        try layout(name, .reshapeStatic(targetShape: targetShape), inputs: input.map { [$0] }, output: output)
    }

    /// Adds a flattenTo2D: axes before `axis` become the first dimension, the rest the second; returns the output blob's name.
    @discardableResult
    public mutating func flattenTo2D(_ name: String, axis: Int = 1, input: String? = nil, output: String? = nil) throws -> String {
        try layout(name, .flattenTo2D(axis: axis), inputs: input.map { [$0] }, output: output)
    }

    /// Adds a squeeze removing the size-1 `axes` (or every size-1 axis with `squeezeAll`); returns the output blob's name.
    @discardableResult
    public mutating func squeeze(_ name: String, axes: [Int], squeezeAll: Bool = false, input: String? = nil,
                                 output: String? = nil) throws -> String {
        try layout(name, .squeeze(axes: axes, squeezeAll: squeezeAll), inputs: input.map { [$0] }, output: output)
    }

    /// Adds an expandDims inserting size-1 axes at `axes` of the output; returns the output blob's name.
    @discardableResult
    public mutating func expandDims(_ name: String, axes: [Int], input: String? = nil, output: String? = nil) throws -> String {
        try layout(name, .expandDims(axes: axes), inputs: input.map { [$0] }, output: output)
    }

    /// Adds a copy: the input unchanged under a new blob name; returns that name.
    @discardableResult
    public mutating func copy(_ name: String, input: String? = nil, output: String? = nil) throws -> String {
        try layout(name, .copy, inputs: input.map { [$0] }, output: output)
    }
}

extension ModelBuilder {
    /// transpose: output axis i is input axis axes[i] of the logical shape.
    @discardableResult
    public mutating func transpose(_ name: String, axes: [Int], input: String? = nil, output: String? = nil) throws -> String {
        try layout(name, .transpose(axes: axes), inputs: input.map { [$0] }, output: output)
    }

    /// Adds a softmaxND normalizing along `axis` of the logical shape (negative counts from the end); returns the output blob's name.
    @discardableResult
    public mutating func softmaxND(_ name: String, axis: Int, input: String? = nil, output: String? = nil) throws -> String {
        try layout(name, .softmaxND(axis: axis), inputs: input.map { [$0] }, output: output)
    }

    /// Adds a concatND joining `inputs` along `axis` of the logical shape; returns the output blob's name.
    @discardableResult
    public mutating func concatND(_ name: String, axis: Int, inputs: [String], output: String? = nil) throws -> String {
        try layout(name, .concatND(axis: axis, interleave: false), inputs: inputs, output: output)
    }
}
