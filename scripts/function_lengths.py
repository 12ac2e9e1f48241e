#!/usr/bin/env python3
"""Lengths of the functions defined in C++ source files, longest first.

    scripts/function_lengths.py [--max N [--allow NAME]...] [FILE_OR_DIR ...]   (default: src/proxy)

A definition is what the house style (clang-format) makes it: a signature starting in column 0
and a body closed by a `}` alone in column 0; the length counts the lines from the signature's
first to the closing brace. Classes, structs, enums and namespaces are not functions. With
--max N, exits 1 when a function is longer than N lines (lists those), else prints the ten
longest; --allow NAME (Class::function) exempts one function from --max, for a known exception
that another change is taking apart."""
import sys
from pathlib import Path

SKIP = ("namespace", "struct", "class", "enum", "union", "template", "#", "//", "/*", "*", "}",
        "using", "static_assert", "extern", "typedef")


def functions(path):
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line or line[0].isspace() or line.startswith(SKIP):
            i += 1
            continue
        # The signature may span lines; it opens its body with a `{` ending one of them.
        # A line ending in `;` or `}` ends a declaration or a one-line definition.
        j = i
        while j < len(lines) and not lines[j].rstrip().endswith(("{", ";", "}")):
            j += 1
        if j >= len(lines) or not lines[j].rstrip().endswith("{") or "=" in lines[i].split("(")[0]:
            i = j + 1
            continue
        k = j + 1
        while k < len(lines) and lines[k] != "}":
            k += 1
        name = lines[i].split("(")[0].split()[-1] if "(" in lines[i] else lines[i].strip()
        yield k - i + 1, f"{path}:{i + 1}", name
        i = k + 1


def main(argv):
    limit, allowed = None, set()
    if argv[:1] == ["--max"]:
        limit, argv = int(argv[1]), argv[2:]
    while argv[:1] == ["--allow"]:
        allowed.add(argv[1])
        argv = argv[2:]
    roots = [Path(a) for a in argv] or [Path(__file__).resolve().parent.parent / "src/proxy"]
    files = [f for r in roots for f in (sorted(r.rglob("*.cpp")) if r.is_dir() else [r])]
    found = sorted((f for path in files for f in functions(path)), reverse=True)
    over = [f for f in found if limit is not None and f[0] > limit and f[2] not in allowed]
    for length, where, name in over if limit is not None else found[:10]:
        print(f"{length:5d}  {name}  {where}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
