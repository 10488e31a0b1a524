#!/usr/bin/env python3
"""Checks the shape of the code a newcomer lives in, and fails (status 1)
saying where it does not hold:

- no module of a crate imports another that imports it back (at every
  depth of the module tree, comments and test modules apart);
- storage (core/src/db) does not use the pages' view types (the app's or
  the views crate's);
- no source file is over 500 lines before its test module.

Usage: scripts/check_modules.py   (from anywhere in the checkout)
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CRATES = ["app/src", "views/src", "core/src", "server/src", "study/src", "engine-bridge/src"]
MAX_LINES = 500


def modules(src):
    """Each module's path (a::b) and the crate paths its code names."""
    found = {}
    for folder, _, files in os.walk(src):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(folder, name)
            parts = os.path.relpath(path, src)[:-3].split(os.sep)
            # A test module's file (`tests.rs`, `x_tests.rs`) may use any
            # module: tests stand outside the layering.
            if parts[-1] == "tests" or parts[-1].endswith("_tests"):
                continue
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            text = open(path, encoding="utf-8").read().split("#[cfg(test)]")[0]
            code = "\n".join(l for l in text.splitlines() if not l.strip().startswith("//"))
            named = set(re.findall(r"crate::([a-z_]+(?:::[a-z_]+)*)", code))
            for sibling in re.findall(r"\bsuper::([a-z_]+)", code):
                named.add("::".join(parts[:-1] + [sibling]))
            found["::".join(parts)] = named
    return found


def cycles(found, depth):
    """Strongly connected groups of modules cut at `depth` levels."""
    names = set(found)

    def owner(path):
        segs = path.split("::")
        for i in range(len(segs), 0, -1):
            if "::".join(segs[:i]) in names:
                return "::".join(segs[:i])
        return None

    def cut(name):
        return "::".join(name.split("::")[:depth])

    graph = {}
    for name, named in found.items():
        for path in named:
            target = owner(path)
            if target is None:
                continue
            a, b = cut(name), cut(target)
            if a != b and not a.startswith(b + "::") and b:
                graph.setdefault(a, set()).add(b)
    index, low, stack, on, groups = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return groups


def main():
    problems = []
    for crate in CRATES:
        found = modules(os.path.join(ROOT, crate))
        for depth in (1, 2, 3):
            for group in cycles(found, depth):
                problems.append(f"{crate}: modules import each other: {', '.join(group)}")
    for folder, _, files in os.walk(os.path.join(ROOT, "core/src/db")):
        for name in files:
            path = os.path.join(folder, name)
            text = open(path, encoding="utf-8").read()
            if "tunebook_app" in text or "tunebook_views" in text:
                problems.append(f"{os.path.relpath(path, ROOT)}: storage uses the view types")
    for crate in CRATES:
        for folder, _, files in os.walk(os.path.join(ROOT, crate)):
            for name in files:
                if name.endswith(".rs"):
                    path = os.path.join(folder, name)
                    code = open(path, encoding="utf-8").read().split("#[cfg(test)]")[0]
                    n = code.count("\n")
                    if n > MAX_LINES:
                        problems.append(f"{os.path.relpath(path, ROOT)}: {n} lines before its tests")
    for p in sorted(set(problems)):
        print(p)
    if problems:
        sys.exit(1)
    print("modules: no circles; storage speaks its own types; no file over 500 lines")


if __name__ == "__main__":
    main()
