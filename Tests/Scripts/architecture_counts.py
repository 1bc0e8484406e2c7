#!/usr/bin/env python3
"""Checks the numbers ARCHITECTURE.md states against the source tree, so that they cannot go stale.

Usage: python3 Tests/Scripts/architecture_counts.py [--write] [--list] [--root DIR] [DOC]

DOC (default ARCHITECTURE.md) marks each number it states with an invisible comment right after it:
    7<!--count:library-targets-->     the exact value of the count `library-targets`
    12,000<!--about:lines:UpdraftBackends-->   a size, right within 10% (written rounded)
The script recomputes every marked count from the tree (Package.swift, Sources/, Kernels/, Tests/)
and exits 1 naming each stale one with the value it should be, and each unknown name. It also fails
when DOC is longer than 250 lines, when its targets table (the one with a "depends on" column)
names other dependencies than Package.swift, or when a file it names in backticks is nowhere in the
tree. --write puts the computed values into DOC in place of the stale ones (then run it again);
--list prints every count it knows. `make layers-check` runs it; Python 3's standard library only.
"""
import fnmatch, os, re, sys

MAX_LINES = 250
ABOUT_TOLERANCE = 0.10
MARK = re.compile(r'(\d[\d,]*)<!--(count|about):([\w:./+-]+)-->')

# ---------------------------------------------------------------------------------------------
# Reading Swift without a parser: comments and string contents removed, braces matched.

def read(root, path):
    with open(os.path.join(root, path), encoding='utf-8') as f:
        return f.read()

def strip(src):
    """Swift source with comments removed and string literals emptied."""
    src = re.sub(r'"""(?:.|\n)*?"""', '""', src)
    src = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', src)
    src = re.sub(r'/\*.*?\*/', '', src, flags=re.S)
    return re.sub(r'//[^\n]*', '', src)

def body(src, header):
    """The text between the braces of the first declaration matching `header` (a regex)."""
    m = re.search(header, src)
    if not m:
        raise LookupError(f'no declaration matching {header!r}')
    start = src.index('{', m.end() - 1 if src[m.end() - 1] == '{' else m.end())
    depth = 0
    for i in range(start, len(src)):
        depth += {'{': 1, '}': -1}.get(src[i], 0)
        if depth == 0:
            return src[start + 1:i]
    raise LookupError(f'unbalanced braces after {header!r}')

def top_level(text):
    """`text` without anything inside (), [] or {}: a declaration body's own statements."""
    out, depth = [], 0
    for c in text:
        if c in '([{':
            depth += 1
        elif c in ')]}':
            depth -= 1
        elif depth == 0:
            out.append(c)
    return ''.join(out)

def enum_cases(src, name):
    """How many cases `enum name` declares (`case a, b` counts 2; nested enums and switches not)."""
    text = top_level(body(strip(src), rf'\benum\s+{name}\b[^{{]*\{{'))
    statements = re.findall(r'^\s*(?:indirect\s+)?case\b((?:[^\n]*,\s*\n)*[^\n]*)', text, flags=re.M)
    return sum(len(s.split(',')) for s in statements)  # a line ending in ',' goes on

def requirements(src, name):
    """How many members `protocol name` requires (funcs, vars, inits, subscripts, associated types)."""
    text = top_level(body(strip(src), rf'\bprotocol\s+{name}\b[^{{]*\{{'))
    member = r'^\s*(?:@\w+\s+)*(?:(?:static|mutating|nonisolated)\s+)*(?:func|var|init|subscript|associatedtype)\b'
    return len(re.findall(member, text, flags=re.M))

def array_entries(src, declaration):
    """How many entries the array literal after `declaration` (a regex ending before `[`) holds."""
    text = strip(src)
    m = re.search(declaration + r'\s*\[', text)
    if not m:
        raise LookupError(f'no array literal after {declaration!r}')
    depth, i = 0, m.end() - 1
    for j in range(i, len(text)):
        depth += {'[': 1, ']': -1}.get(text[j], 0)
        if depth == 0:
            return len([e for e in top_level(text[i + 1:j]).split(',') if e.strip()])
    raise LookupError(f'unbalanced brackets after {declaration!r}')

# ---------------------------------------------------------------------------------------------
# The tree.

class Tree:
    def __init__(self, root):
        self.root = root
        self.texts, self.strips = {}, {}
        self.files = []
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith('.') or x == '.ci']
            dirs[:] = [x for x in dirs if x not in ('.build', 'demo-output', 'Fixtures', '__pycache__')]
            self.files += [os.path.relpath(os.path.join(d, n), root) for n in names]
        self.files.sort()
        self.package = Package(read(root, 'Package.swift'))

    def under(self, folder, ext):
        """Files under `folder` (a path from the root) whose names end in `ext`."""
        prefix = folder.rstrip('/') + '/'
        return [f for f in self.files if f.startswith(prefix) and f.endswith(ext)]

    def swift(self, folders=('Sources',)):
        return [f for folder in folders for f in self.under(folder, '.swift')]

    def text(self, path):
        if path not in self.texts:
            self.texts[path] = read(self.root, path)
        return self.texts[path]

    def stripped(self, path):
        if path not in self.strips:
            self.strips[path] = strip(self.text(path))
        return self.strips[path]

    def lines(self, paths):
        return sum(self.text(p).count('\n') for p in paths)

    def declaring(self, pattern, folders=('Sources',)):
        """The one Swift file that declares `pattern` (a regex)."""
        hits = [f for f in self.swift(folders) if re.search(pattern, self.stripped(f))]
        if len(hits) != 1:
            raise LookupError(f'{len(hits)} files declare {pattern!r}: {", ".join(hits) or "none"}')
        return hits[0]

    def conformers(self, protocol, folders=('Sources',)):
        """Types that conform to `protocol` or to a protocol refining it, in `folders`."""
        sources = [self.stripped(f) for f in self.swift(folders)]
        protocols, types = {protocol}, set()
        decl = re.compile(r'\b(protocol|struct|enum|class|actor|extension)\s+([\w.]+)\s*(?:<[^>{]*>)?\s*:\s*([^{]*)\{')
        for _ in range(3):  # refinements of refinements
            for src in sources:
                for kind, name, inherits in decl.findall(src):
                    inherited = {p.strip().split('<')[0] for p in re.split(r',|\bwhere\b', inherits)}
                    if inherited & protocols:
                        (protocols if kind == 'protocol' else types).add(name)
        return sorted(types)


class Package:
    """Package.swift's targets: kind, name, path, dependencies."""
    KINDS = r'(target|systemLibrary|executableTarget|testTarget|plugin)'

    def __init__(self, src):
        src = re.sub(r'("(?:\\.|[^"\\\n])*")|//[^\n]*', lambda m: m.group(1) or '', src)  # comments out, strings kept
        self.targets = {}
        for m in re.finditer(rf'\.{self.KINDS}\(\s*name:\s*"([^"]+)"', src):
            kind, name = m.group(1), m.group(2)
            args = self.arguments(src, m.end())
            deps = re.search(r'dependencies:\s*\[([^\]]*)\]', args)
            path = re.search(r'path:\s*"([^"]+)"', args)
            default = ('Tests/' if kind == 'testTarget' else 'Sources/') + name
            self.targets[name] = {
                'kind': kind,
                'path': path.group(1) if path else default,
                'dependencies': re.findall(r'"([^"]+)"', deps.group(1)) if deps else [],
            }

    @staticmethod
    def arguments(src, start):
        depth = 1
        for i in range(start, len(src)):
            depth += {'(': 1, ')': -1}.get(src[i], 0)
            if depth == 0:
                return src[start:i]
        raise LookupError('unbalanced parentheses in Package.swift')

    def library(self):
        """The targets the product's target `Updraft` re-exports, in dependency order."""
        return self.targets['Updraft']['dependencies']

    def swift_targets(self):
        return [n for n, t in self.targets.items() if t['kind'] in ('target', 'executableTarget', 'testTarget')
                and not n.startswith('C') and n != 'embed-kernels']

# ---------------------------------------------------------------------------------------------
# The counts, by name. Each is small: where it looks, and what it counts.

def target_swift(tree, name):
    t = tree.package.targets.get(name)
    if t is None:
        raise KeyError(name)
    return tree.swift([t['path']])

def target_folders(tree, name):
    path = tree.package.targets[name]['path']
    return sorted({os.path.dirname(f) for f in target_swift(tree, name) if os.path.dirname(f) != path})

def family_rows(tree, codec='LayerFamilyCodec'):
    """The types a `static let families: [any <codec>.Type]` lists, one per open family: the layer
    families' parameter types (`LayerParams.families`, LayerTable.swift) or the model kinds' specs
    (`ModelBody.families`, ModelSpec.swift, with codec `ModelBodyCodec`)."""
    declaration = rf'static\s+let\s+families\s*:\s*\[\s*any\s+{codec}\.Type\s*\]\s*='
    table = strip(tree.text(tree.declaring(declaration)))
    m = re.search(declaration + r'\s*\[([^\]]*)\]', table)
    if not m:
        raise LookupError(f'no `static let families: [any {codec}.Type] = [...]` array')
    return [e.strip()[:-len('.self')] for e in m.group(1).split(',') if e.strip().endswith('.self')]

def layer_types_of(tree, owner):
    """How many layer types `owner`'s `static let layerTypes` lists."""
    file = tree.declaring(rf'\b(?:enum|struct)\s+{owner}\b')
    return array_entries(tree.text(file), r'static\s+let\s+layerTypes\s*:\s*\[\w+\]\s*=')

def typed_layer_types(tree):
    """NeuralNetworkLayer types that LayerParams.readers decodes as typed parameters: its literal
    rows, plus each `for x in …` over a list, an enum's allCases or a family's `layerTypes`."""
    table = tree.declaring(r'static\s+let\s+readers\b')
    text = body(strip(tree.text(table)), r'static\s+let\s+readers\b[^=]*=\s*\{')
    count = len(re.findall(r'^\s*\.\w+\s*:\s*\{', text, flags=re.M))
    for source in re.findall(r'\bfor\s+\w+\s+in\s+([^{]+)\{', text):
        source = source.strip()
        if source.startswith('['):
            count += len([e for e in source.strip('[]').split(',') if e.strip()])
        elif source.endswith('.allCases'):
            enum = source[:-len('.allCases')]
            count += enum_cases(tree.text(tree.declaring(rf'\benum\s+{enum}\b')), enum)
        elif source.endswith('.layerTypes') and source[0].islower():
            continue  # `for type in family.layerTypes` inside the families loop, counted there
        elif source.endswith('.layerTypes'):
            owner = source[:-len('.layerTypes')]
            file = tree.declaring(rf'\b(?:enum|struct)\s+{owner}\b')
            count += array_entries(tree.text(file), r'static\s+let\s+layerTypes\s*:\s*\[\w+\]\s*=')
        elif source == 'families':  # the open families: each row's own layerTypes
            count += sum(layer_types_of(tree, owner) for owner in family_rows(tree))
        else:
            raise LookupError(f'readers: cannot count `for … in {source}`')
    return count

def counts(tree):
    """Every count the document may state: name -> function of the tree."""
    p = tree.package
    file_of = lambda pattern: tree.text(tree.declaring(pattern))
    c = {
        # Package.swift
        'package-targets': lambda: len(p.targets),
        'library-targets': lambda: len(p.library()),
        'system-libraries': lambda: sum(t['kind'] == 'systemLibrary' for t in p.targets.values()),
        'c-targets': lambda: sum(t['kind'] == 'target' and n.startswith('C') for n, t in p.targets.items()),
        'library-files': lambda: sum(len(target_swift(tree, n)) for n in p.library()),
        'library-lines': lambda: sum(tree.lines(target_swift(tree, n)) for n in p.library()),
        'library-folders': lambda: sum(len(target_folders(tree, n)) for n in p.library()),
        # The registries an op is spread over
        'layer-ops': lambda: enum_cases(file_of(r'\benum\s+LayerOp\b'), 'LayerOp'),
        'layer-kinds': lambda: len(tree.conformers('LayerKind')),
        'layer-kind-requirements': lambda: requirements(file_of(r'\bprotocol\s+LayerKind\b'), 'LayerKind'),
        'layer-params': lambda: enum_cases(file_of(r'\benum\s+LayerParams\b'), 'LayerParams'),
        'layer-param-files': lambda: len([f for f in tree.swift() if os.path.basename(f).startswith('Layers+')]),
        'backend-requirements': lambda: requirements(file_of(r'\bprotocol\s+Backend\b'), 'Backend'),
        'device-ops': lambda: len(tree.conformers('DeviceOp')),
        'device-op-files': lambda: len([f for f in tree.swift() if os.path.basename(f).startswith('DeviceOps+')]),
        'verified-ops': lambda: len(tree.conformers('VerifiedOp')),
        'verified-op-requirements': lambda: requirements(file_of(r'\bprotocol\s+VerifiedOp\b'), 'VerifiedOp'),
        'reference-files': lambda: len([f for f in tree.swift() if os.path.basename(f).startswith('Reference+')]),
        'kernel-files': lambda: len(tree.under('Kernels', '.cl')),
        'kernel-headers': lambda: len(tree.under('Kernels', '.h')),
        'activation-kinds': lambda: enum_cases(file_of(r'\benum\s+ActivationKind\b'), 'ActivationKind'),
        'reduce-modes': lambda: enum_cases(file_of(r'\benum\s+ReduceMode\b'), 'ReduceMode'),
        'layout-ops': lambda: enum_cases(file_of(r'\benum\s+LayoutOp\b'), 'LayoutOp'),
        # Core ML
        'coreml-layer-types': lambda: enum_cases(file_of(r'\benum\s+NeuralNetworkLayerType\b'), 'NeuralNetworkLayerType'),
        'coreml-activation-types': lambda: enum_cases(file_of(r'\benum\s+ActivationParamsType\b'), 'ActivationParamsType'),
        'coreml-model-types': lambda: enum_cases(file_of(r'\benum\s+CoreMLModelType\b'), 'CoreMLModelType'),
        'typed-layer-types': lambda: typed_layer_types(tree),
        'layer-families': lambda: len(family_rows(tree)),
        'model-bodies': lambda: enum_cases(file_of(r'\benum\s+ModelBody\b'), 'ModelBody'),
        'model-families': lambda: len(family_rows(tree, 'ModelBodyCodec')),
        # Optimizers and model kinds
        'optimizers': lambda: len(tree.conformers('Optimizer')),
        'optimizer-requirements': lambda: requirements(file_of(r'\bprotocol\s+Optimizer\b'), 'Optimizer'),
        'model-kinds': lambda: len(tree.conformers('UpdatableModelKind')),
        'model-kind-requirements': lambda: requirements(file_of(r'\bprotocol\s+UpdatableModelKind\b'), 'UpdatableModelKind'),
        # Executables and tests
        'cli-commands': lambda: array_entries(tree.text('Sources/updraft/main.swift'), r'let\s+commands\s*:\s*\[\w+\]\s*='),
        'bench-commands': lambda: array_entries(tree.text('Benchmarks/updraft-bench/main.swift'),
                                                r'let\s+commands\s*:\s*\[\w+\]\s*='),
        'test-files': lambda: len([f for f in tree.swift(['Tests']) if re.search(r'\bfunc\s+test\w*\s*\(', tree.stripped(f))]),
        'test-helpers': lambda: len(tree.under('Tests/UpdraftTests/Support', '.swift')),
        'tests': lambda: sum(len(re.findall(r'\bfunc\s+test\w*\s*\(', tree.stripped(f))) for f in tree.swift(['Tests'])),
    }
    for name in p.swift_targets():
        c[f'files:{name}'] = lambda n=name: len(target_swift(tree, n))
        c[f'lines:{name}'] = lambda n=name: tree.lines(target_swift(tree, n))
        c[f'folders:{name}'] = lambda n=name: len(target_folders(tree, n))
    return c

# ---------------------------------------------------------------------------------------------
# The document.

def number(text):
    return int(text.replace(',', ''))

def rounded(n):
    """A size as the document writes it: two significant figures from 100 up."""
    if n < 100:
        return n
    scale = 10 ** (len(str(n)) - 2)
    return round(n / scale) * scale

def written(n):
    return f'{n:,}'

def check_marks(doc, known):
    """(stale, problems, fixed document): each marked number against its count. A stale number is
    one --write can put right; a problem (an unknown name, a count that cannot be computed) is not."""
    stale, problems, values = [], [], {}

    def replace(m):
        stated, mode, name = number(m.group(1)), m.group(2), m.group(3)
        if name not in known:
            problems.append(f'unknown count "{name}" (--list shows the known ones)')
            return m.group(0)
        try:
            actual = values[name] if name in values else values.setdefault(name, known[name]())
        except (LookupError, OSError) as e:
            problems.append(f'count "{name}" could not be computed: {e}')
            return m.group(0)
        if mode == 'count' and stated != actual:
            stale.append(f'{name}: the document says {written(stated)}, the tree has {written(actual)}')
            return f'{written(actual)}<!--count:{name}-->'
        if mode == 'about' and abs(stated - actual) > max(ABOUT_TOLERANCE * actual, 10):
            stale.append(f'{name}: the document says about {written(stated)}, the tree has {written(actual)} '
                         f'(about {written(rounded(actual))})')
            return f'{written(rounded(actual))}<!--about:{name}-->'
        return m.group(0)

    fixed = MARK.sub(replace, doc)
    return stale, problems, fixed

def check_dependencies(doc, package):
    """The targets table (header has "depends on"): each row's dependencies as Package.swift has them."""
    problems, column = [], None
    for line in doc.splitlines():
        if not line.startswith('|'):
            column = None
            continue
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if column is None:
            column = next((i for i, c in enumerate(cells) if c.lower() == 'depends on'), None)
            continue
        name = re.fullmatch(r'`([\w-]+)`', cells[0])
        if column >= len(cells) or not name or name.group(1) not in package.targets:
            continue
        stated = set(re.findall(r'`([\w-]+)`', cells[column]))
        actual = set(package.targets[name.group(1)]['dependencies'])
        if stated != actual:
            problems.append(f'targets table: {name.group(1)} depends on {", ".join(sorted(actual)) or "nothing"} '
                            f'in Package.swift, the document says {", ".join(sorted(stated)) or "nothing"}')
    return problems

def check_paths(doc, tree):
    """Every file named in backticks (`Training/UpdateTask.swift`, `DeviceOps+<Family>.swift`) exists."""
    problems = []
    for name in sorted(set(re.findall(r'`([\w<>*+./-]+\.(?:swift|cl|h|c|py|sh))`', doc))):
        pattern = re.sub(r'<[^>]*>', '*', name)
        if not any(fnmatch.fnmatch(f, pattern) or fnmatch.fnmatch(f, '*/' + pattern) for f in tree.files):
            problems.append(f'no file matches `{name}`')
    return problems

def main(argv):
    args = [a for a in argv if not a.startswith('--')]
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if '--root' in argv:
        root = argv[argv.index('--root') + 1]
        args.remove(root)
    tree = Tree(root)
    known = counts(tree)
    if '--list' in argv:
        for name in sorted(known):
            print(f'{name} = {known[name]()}')
        return 0
    path = args[0] if args else os.path.join(root, 'ARCHITECTURE.md')
    with open(path, encoding='utf-8') as f:
        doc = f.read()
    stale, problems, fixed = check_marks(doc, known)
    problems += check_dependencies(doc, tree.package)
    problems += check_paths(doc, tree)
    lines = len(doc.splitlines())
    if lines > MAX_LINES:
        problems.append(f'{path} has {lines} lines; it may have {MAX_LINES}')
    if '--write' in argv and stale:
        with open(path, 'w', encoding='utf-8') as f:
            f.write(fixed)
        for s in stale:
            print(f'{path}: rewrote {s}')
    else:
        problems = [f'stale count {s}' for s in stale] + problems
    for p in problems:
        print(f'{path}: {p}')
    if stale and '--write' not in argv:
        print(f'to put the stale counts right: python3 Tests/Scripts/architecture_counts.py --write {path}')
    print(f'architecture counts: {len(MARK.findall(doc))} numbers checked, {len(problems)} problems, {lines} lines')
    return 1 if problems else 0

if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
