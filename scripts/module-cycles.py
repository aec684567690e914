#!/usr/bin/env python3
"""Fails when the top-level modules of a crate depend on each other in a cycle (issue 18: "no
module cycle inside any crate"). For every crate of the repository (each Cargo.toml with a src/
folder), each top-level module (src/NAME.rs or src/NAME/) depends on the modules its files name
as `crate::NAME`, including inside `use crate::{a, b::c}` groups and through the crate root's
re-exports (`crate::Metrics` is `metrics`'s). Prints each cycle found.
usage: scripts/module-cycles.py [ROOT]"""
import re
import sys
from pathlib import Path

root = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
SKIP = {"target", ".git", "node_modules", "vendor"}


def group_names(text, start):
    """Top-level names of a `{...}` group starting at text[start] == '{'."""
    depth, name, names = 0, "", []
    for ch in text[start:]:
        if ch == "{":
            depth += 1
            if depth == 1:
                continue
        elif ch == "}":
            depth -= 1
            if depth == 0:
                break
        if depth == 1:
            if ch == ",":
                names.append(name)
                name = ""
            else:
                name += ch
    names.append(name)
    out = []
    for n in names:
        m = re.match(r"\s*(?:r#)?([A-Za-z_]\w*)", n)
        if m:
            out.append(m.group(1))
    return out


def references(text, reexports):
    """Top-level modules named as `crate::NAME`; a crate-root re-export (`crate::Metrics`,
    from `pub use metrics::Metrics` in lib.rs) counts as the module it comes from."""
    names = set()
    for m in re.finditer(r"\bcrate::(\{|[A-Za-z_]\w*)", text):
        found = group_names(text, m.start(1)) if m.group(1) == "{" else [m.group(1)]
        names.update(reexports.get(n, n) for n in found)
    return names


def root_reexports(root_file):
    """Item name -> module, from `pub use module::{A, B}` / `pub use module::A` at the crate root."""
    out = {}
    if not root_file.is_file():
        return out
    text = strip_comments(root_file.read_text())
    for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+(?:crate::|self::)?([A-Za-z_]\w*)::(\{|[A-Za-z_]\w*)", text):
        items = group_names(text, m.start(2)) if m.group(2) == "{" else [m.group(2)]
        for item in items:
            out[item] = m.group(1)
    return out


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def cycles(graph):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


found = 0
crates = 0
for manifest in sorted(root.rglob("Cargo.toml")):
    if SKIP & set(manifest.relative_to(root).parts):
        continue
    src = manifest.parent / "src"
    if not src.is_dir():
        continue
    crates += 1
    modules = {}
    for p in src.iterdir():
        if p.suffix == ".rs" and p.stem not in ("lib", "main"):
            modules.setdefault(p.stem, []).append(p)
        elif p.is_dir() and p.name != "bin":
            modules.setdefault(p.name, []).extend(p.rglob("*.rs"))
    reexports = {}
    for root_file in (src / "lib.rs", src / "main.rs"):
        reexports.update(root_reexports(root_file))
    graph = {m: set() for m in modules}
    for m, files in modules.items():
        for f in files:
            for name in references(strip_comments(f.read_text()), reexports):
                if name in modules and name != m:
                    graph[m].add(name)
    for c in cycles(graph):
        found += 1
        edges = [f"{a} -> {b}" for a in c for b in sorted(graph[a]) if b in c]
        print(f"{src.parent.relative_to(root)}: module cycle among {', '.join(c)} ({'; '.join(edges)})")
if found:
    sys.exit(1)
print(f"module-cycles: no cycle among the top-level modules of {crates} crates")
