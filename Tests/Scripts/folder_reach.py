#!/usr/bin/env python3
"""Which folder of the library uses names declared top-level in which other folder.

Usage: python3 Tests/Scripts/folder_reach.py [--check] [ROOT] [TIERS]
ROOT is Sources (folders are named with their target, `UpdraftCore/Tensor`). TIERS lists the folders
lowest first, tiers separated by ';' and folders within a tier by ',' (a tier is a SwiftPM target: its
folders may use each other; the compiler itself refuses a target importing a later one). With TIERS it
reads only the targets TIERS names and prints only the reaches upward, a folder using a name declared
in a later tier; with --check it exits 1 when there is any. ARCHITECTURE.md lists the tiers;
`make layers-check` runs the check in `make test`. Names used only inside string interpolation and
extension members are not seen (the compiler catches those across targets).
"""
import os, re, sys, collections
args = [a for a in sys.argv[1:] if a != '--check']
check = '--check' in sys.argv[1:]
root = args[0] if args else 'Sources'
tiers = [t.split(',') for t in args[1].split(';')] if len(args) > 1 else None
decl = re.compile(r'^(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|final|indirect|nonisolated)\s+)*(struct|class|enum|protocol|actor|typealias|func|let|var)\s+([A-Za-z_]\w*)')
def strip(src):
    src = re.sub(r'//.*', '', src)
    src = re.sub(r'/\*.*?\*/', '', src, flags=re.S)
    src = re.sub(r'"""(?:.|\n)*?"""', '""', src)
    src = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', src)
    return src
targets = {f.split('/')[0] for tier in tiers for f in tier} if tiers else None
folders = collections.defaultdict(list)
for d, _, files in os.walk(root):
    for f in files:
        rel = os.path.relpath(d, root)
        if f.endswith('.swift') and (targets is None or rel.split('/')[0] in targets):
            folders[rel].append(os.path.join(d, f))
names = {}
for folder, files in folders.items():
    for p in files:
        for line in open(p):
            m = decl.match(line)
            if m and not line.startswith(('private', 'fileprivate')):
                names.setdefault(m.group(2), folder)
edges = collections.defaultdict(set)
for folder, files in folders.items():
    for p in files:
        words = set(re.findall(r'[A-Za-z_]\w*', strip(open(p).read())))
        for w in words:
            o = names.get(w)
            if o and o != folder:
                edges[(folder, o)].add(w)
if tiers:
    rank = {f: i for i, tier in enumerate(tiers) for f in tier}
    unplaced = sorted(set(folders) - set(rank))
    if unplaced:
        print('folders in no tier:', ', '.join(unplaced))
    upward = 0
    for (a, b), ws in sorted(edges.items()):
        if a in rank and b in rank and rank[b] > rank[a]:
            upward += 1
            print(f'UPWARD {a} -> {b}: {", ".join(sorted(ws))}')
    if check:
        print(f'folder tiers: {upward} upward reaches, {len(unplaced)} folders in no tier')
        sys.exit(1 if upward or unplaced else 0)
else:
    for (a, b), ws in sorted(edges.items()):
        print(f'{a} -> {b}: {", ".join(sorted(ws)[:12])}')
