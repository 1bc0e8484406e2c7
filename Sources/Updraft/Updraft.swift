// The product `Updraft`: every library target, re-exported, so `import Updraft` sees the whole public API.
// The targets themselves, lowest first, are in Package.swift and ARCHITECTURE.md section 1.
@_exported import UpdraftCore
@_exported import UpdraftBackends
@_exported import UpdraftModel
@_exported import UpdraftLayers
@_exported import UpdraftPlacement
@_exported import UpdraftChecks
@_exported import UpdraftData
@_exported import UpdraftTraining
