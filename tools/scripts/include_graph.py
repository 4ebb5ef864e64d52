#!/usr/bin/env python3
"""The engine's include graph, and the rule that keeps it pointing down (engine/README.md).

  include_graph.py [ROOT]         checks ROOT (default: the repository): exit status 1, with
                                  every offending line named, when a folder of engine/ reaches
                                  a folder at its own level or above
  include_graph.py --dot [ROOT]   prints the folder graph (Graphviz dot), levels as ranks
  include_graph.py --self-test    checks that the check fails on an upward arrow, a two-way tie,
                                  a forward declaration upward (either way of opening the
                                  namespace) and an unplaced folder or header

An arrow is an `#include "FOLDER/..."` in engine/FOLDER2/, an `#include "ringsafe/X.hpp"` or
`#include <ringsafe/X.hpp>` (a public header counts as the folder that defines what it declares,
HOMES), a public header's own includes, and a `namespace ringsafe::FOLDER` or a nested
`namespace ringsafe { namespace FOLDER` opened outside FOLDER (a forward declaration names that
folder as surely as an include). Each folder sits on a level (LEVELS, bottom first) and may
reach only folders on lower levels: no arrow points up, and two folders never include each other.
"""
import os
import re
import sys
import tempfile

# Bottom first. A folder reaches only folders of a lower level; folders that share a level
# (uring and http, read and write, ...) never reach each other.
LEVELS = [
    ["format"],              # dtypes, errors, the header and index formats
    ["source"],              # the source seam: async_source, deferred_open, abandon_list
    ["plan"],                # selections -> byte ranges (read_op is the seam's)
    ["memory", "file"],      # destination memory; a local file by plain system calls
    ["uring", "http"],       # the executors: io_uring rings, the HTTP transport
    ["stores", "dequant"],   # what each URL scheme names, built on http; GGUF blocks to floats
    ["dispatch"],            # the one dispatcher: picks the store and the source
    ["read", "write"],       # the reader and the writer
    ["asio", "device", "convert", "edit"],  # front ends and destinations above the reader; conversions (read -> write); metadata edits
    ["python"],              # the Python extension
]

# Public header (include/ringsafe/) -> the engine folder that defines what it declares.
HOMES = {
    "dtype.hpp": "format",
    "error.hpp": "format",
    "dims.hpp": "format",
    "header.hpp": "format",
    "ggml_type.hpp": "format",
    "gguf.hpp": "format",
    "dequantize.hpp": "dequant",
    "index.hpp": "format",
    "source.hpp": "source",
    "plan.hpp": "plan",
    "selection.hpp": "plan",
    "buffer.hpp": "memory",
    "mapped_file.hpp": "file",
    "file_source.hpp": "uring",
    "http.hpp": "http",
    "stores.hpp": "stores",
    "open_source.hpp": "dispatch",
    "reader.hpp": "read",
    "writer.hpp": "write",
    "gguf_writer.hpp": "write",
    "edit.hpp": "edit",
    "device.hpp": "device",
    "convert.hpp": "convert",
    "asio.hpp": "asio",
    "detail/asio_initiate.hpp": "asio",
}

INCLUDE = re.compile(r'^\s*#\s*include\s+(?:"([^"]+)"|<(ringsafe/[^>]+)>)')
# ringsafe::FOLDER, or FOLDER opened first inside a `namespace ringsafe {` (on its line or the
# next ones; one opened after another namespace inside it, `namespace ringsafe { namespace {...}
# namespace FOLDER {`, goes unseen).
NAMESPACE = re.compile(r"\bnamespace\s+ringsafe(?:::(\w+)|\s*\{\s*namespace\s+(\w+))")


def level_of(levels):
    return {folder: n for n, row in enumerate(levels) for folder in row}


def arrows(root, homes):
    """(from_folder, to_folder, where) for every reach across folders, and the problems found."""
    found, problems = [], []
    engine = os.path.join(root, "engine")
    public = os.path.join(root, "include", "ringsafe")
    folders = {d for d in os.listdir(engine) if os.path.isdir(os.path.join(engine, d))}

    def target(inc, here_dir):
        top, _, rest = inc.partition("/")
        if top == "ringsafe":
            return homes.get(rest, ("public", rest))
        if not rest or os.path.exists(os.path.join(here_dir, inc)):
            return None  # beside the including file
        if top in folders:
            return top
        return ("unknown", inc)

    def scan(path, folder, shown):
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for n, line in enumerate(text.splitlines(), 1):
            where = f"{shown}:{n}"
            m = INCLUDE.match(line)
            if m:
                inc = m.group(1) or m.group(2)
                written = f'"{inc}"' if m.group(1) else f"<{inc}>"
                t = target(inc, os.path.dirname(path))
                if isinstance(t, tuple):
                    what = "public header" if t[0] == "public" else "include"
                    problems.append(f"{where}: {what} {inc!r} has no place in "
                                    "tools/scripts/include_graph.py (HOMES or LEVELS)")
                elif t and t != folder:
                    found.append((folder, t, f"{where}: #include {written}"))
        for m in NAMESPACE.finditer(text):
            ns = m.group(1) or m.group(2)
            if ns in folders and ns != folder:
                n = text.count("\n", 0, m.start(1) if m.group(1) else m.start(2)) + 1
                opened = f"ringsafe::{ns}" if m.group(1) else f"ringsafe {{ namespace {ns}"
                found.append((folder, ns, f"{shown}:{n}: namespace {opened}"))

    for folder in sorted(folders):
        for d, _, files in os.walk(os.path.join(engine, folder)):
            for f in sorted(files):
                if f.endswith((".cpp", ".hpp")):
                    p = os.path.join(d, f)
                    scan(p, folder, os.path.relpath(p, root))
    for d, _, files in os.walk(public):
        for f in sorted(files):
            if not f.endswith(".hpp"):
                continue
            p = os.path.join(d, f)
            name = os.path.relpath(p, public)
            if name not in homes:
                problems.append(f"include/ringsafe/{name}: public header without a home folder "
                                "in tools/scripts/include_graph.py (HOMES)")
                continue
            scan(p, homes[name], os.path.relpath(p, root))
    return folders, found, problems


def check(root, levels=LEVELS, homes=HOMES):
    """The rule's violations, one line each (empty: the graph points down)."""
    folders, found, problems = arrows(root, homes)
    level = level_of(levels)
    for f in sorted(folders - level.keys()):
        problems.append(f"engine/{f}/: a folder without a level in tools/scripts/include_graph.py (LEVELS)")
    pairs = {(a, b) for a, b, _ in found}
    for a, b, where in found:
        if a not in level or b not in level or level[b] < level[a]:
            continue
        if level[b] == level[a]:
            why = f"{a} reaches {b}, on its own level"
        else:
            why = f"{a} (level {level[a]}) reaches {b} (level {level[b]}) above it"
        if (b, a) in pairs:
            why += f"; {a} and {b} reach each other"
        problems.append(f"{where}: {why}")
    return problems


def dot(root):
    _, found, _ = arrows(root, HOMES)
    counts = {}
    for a, b, _ in found:
        counts[(a, b)] = counts.get((a, b), 0) + 1
    out = ["digraph engine {", "  rankdir=BT;"]
    for n, row in enumerate(LEVELS):
        out.append(f"  {{ rank=same; {' '.join(row)} }}  // level {n}")
    out += [f'  {a} -> {b} [label="{n}"];' for (a, b), n in sorted(counts.items())]
    out.append("}")
    return "\n".join(out)


def self_test():
    """Each kind of violation in a small tree must be reported; the clean tree must pass."""
    levels = [["low"], ["mid_a", "mid_b"], ["high"]]
    homes = {"low.hpp": "low", "high.hpp": "high"}
    clean = {
        "engine/low/a.hpp": '#include "ringsafe/low.hpp"\n',
        "engine/mid_a/b.cpp": '#include "low/a.hpp"\n#include "b.hpp"\n',
        "engine/mid_a/b.hpp": "",
        "engine/high/c.cpp": '#include "mid_a/b.hpp"\n#include "ringsafe/high.hpp"\n',
        "include/ringsafe/low.hpp": "",
        "include/ringsafe/high.hpp": '#include "ringsafe/low.hpp"\n',
    }
    cases = {
        "upward include": ({"engine/low/x.cpp": '#include "high/c.hpp"\n'}, "above it"),
        "upward public header": ({"engine/mid_b/x.cpp": '#include "ringsafe/high.hpp"\n'}, "above it"),
        "public header upward": ({"include/ringsafe/low.hpp": '#include "ringsafe/high.hpp"\n'}, "above it"),
        "two-way tie": ({"engine/mid_b/x.cpp": '#include "mid_a/b.hpp"\n',
                         "engine/mid_a/y.cpp": '#include "mid_b/x.hpp"\n'}, "reach each other"),
        "same level": ({"engine/mid_b/x.cpp": '#include "mid_a/b.hpp"\n'}, "on its own level"),
        "forward declaration": ({"engine/low/x.hpp": "namespace ringsafe::high { class c; }\n"}, "above it"),
        "nested forward declaration": ({"engine/low/x.hpp": "namespace ringsafe {\nnamespace high {\nclass c;\n}\n}\n"},
                                       "above it"),
        "public header in <>": ({"engine/mid_b/x.cpp": "#include <ringsafe/high.hpp>\n"}, "above it"),
        "unplaced folder": ({"engine/new/x.cpp": ""}, "without a level"),
        "unplaced header": ({"include/ringsafe/new.hpp": ""}, "without a home"),
    }
    failures = []
    for name, (extra, expect) in [("clean tree", ({}, None))] + list(cases.items()):
        with tempfile.TemporaryDirectory() as root:
            for rel, text in {**clean, **extra}.items():
                os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
                with open(os.path.join(root, rel), "w") as f:
                    f.write(text)
            problems = check(root, levels, homes)
            if expect is None and problems:
                failures.append(f"{name}: reported {problems}")
            elif expect is not None and not any(expect in p for p in problems):
                failures.append(f"{name}: not reported ({problems})")
    for f in failures:
        print("self-test:", f)
    print(f"self-test: {len(cases) + 1 - len(failures)} of {len(cases) + 1} cases as expected")
    return 1 if failures else 0


def main(argv):
    if argv[:1] == ["--self-test"]:
        return self_test()
    if argv[:1] == ["--dot"]:
        print(dot(argv[1] if len(argv) > 1 else default_root()))
        return 0
    root = argv[0] if argv else default_root()
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} reach(es) against the include rule (engine/README.md, 'Includes point down')")
        return 1
    print("the include graph points down: no upward arrow, no two-way tie")
    return 0


def default_root():
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
