#!/usr/bin/env python3
"""Which folder of Sources/Updraft uses names declared top-level in which other folder.

Usage: python3 Tests/Scripts/folder_reach.py [ROOT] [FOLDER,FOLDER,...]
With an order (lowest first) it prints only the reaches upward: a folder using a name declared
in a folder after it. ARCHITECTURE.md lists the order and what is left.
"""
import os, re, sys, collections
root = sys.argv[1] if len(sys.argv) > 1 else 'Sources/Updraft'
order = sys.argv[2].split(',') if len(sys.argv) > 2 else None
decl = re.compile(r'^(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|final|indirect|nonisolated)\s+)*(struct|class|enum|protocol|actor|typealias|func|let|var)\s+([A-Za-z_]\w*)')
def strip(src):
    src = re.sub(r'//.*', '', src)
    src = re.sub(r'/\*.*?\*/', '', src, flags=re.S)
    src = re.sub(r'"""(?:.|\n)*?"""', '""', src)
    src = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', src)
    return src
folders = collections.defaultdict(list)
for d, _, files in os.walk(root):
    for f in files:
        if f.endswith('.swift'):
            folders[os.path.relpath(d, root)].append(os.path.join(d, f))
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
if order:
    rank = {f: i for i, f in enumerate(order)}
    for (a, b), ws in sorted(edges.items()):
        if a in rank and b in rank and rank[b] > rank[a]:
            print(f'UPWARD {a} -> {b}: {", ".join(sorted(ws))}')
else:
    for (a, b), ws in sorted(edges.items()):
        print(f'{a} -> {b}: {", ".join(sorted(ws)[:12])}')
