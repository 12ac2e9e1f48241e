#!/usr/bin/env python3
"""Two rules of the config module (docs/architecture.md, "Config"), checked over src/:
  1. No string comparison of a config value outside src/config: closed sets are enums parsed by
     the loader (config::Balance, LogLevel, ...), so `x.balance == "hash"` or
     `c.store == "memory"` outside src/config is an error.
  2. A key's name is written once, in its section's key table (src/config/load_*.cpp): any other
     string literal in src/ equal to a key name that its section's code writes again is counted,
     and the count may not grow past the number recorded below (the custom readers that still
     name their key; each one removed lowers it).
Usage: check_config_use.py [--max-repeated N]   (exit 1 on a violation)"""
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
CONFIG_HEADERS = [ROOT / "include/sluice/config/config.hpp", ROOT / "include/sluice/config/idempotency.hpp"]
# The repeated key names left today (rule 2); lower it when a reader stops naming its key.
MAX_REPEATED = 150


def string_members():
    """Names of the std::string members of the config structs."""
    names = set()
    for header in CONFIG_HEADERS:
        names |= set(re.findall(r"^\s+std::string (\w+)(?: = [^;]*)?;", header.read_text(), re.M))
    # Members whose names other types share (a URL parameter's value, a metric label's name):
    # a config struct's member of that name is not compared with a literal anywhere.
    return names - {"value", "name"}


def sources(outside_config):
    for path in sorted(SRC.rglob("*.[ch]pp")):
        if outside_config and path.is_relative_to(SRC / "config"):
            continue
        yield path


def string_comparisons():
    members = "|".join(sorted(string_members()))
    compare = re.compile(
        rf"(?:\.|->)(?:{members})\s*(?:==|!=)\s*\"|\"\s*(?:==|!=)\s*[\w.>-]*(?:\.|->)(?:{members})\b")
    found = []
    for path in sources(outside_config=True):
        for number, text in enumerate(path.read_text().splitlines(), 1):
            if compare.search(text) and not text.lstrip().startswith("//"):
                found.append(f"{path.relative_to(ROOT)}:{number}: compares a config string: {text.strip()}")
    return found


def key_names():
    """Key name -> table rows declaring it, from the key tables of src/config/load_*.cpp."""
    row = re.compile(r"(?:string|bool|strings|integer|duration|size|number|choice|custom)_key(?:<[^>]*>)?\(\s*\"(\w+)\"")
    names = {}
    for path in sorted((SRC / "config").glob("load_*.cpp")):
        for name in row.findall(path.read_text()):
            names[name] = names.get(name, 0) + 1
    return names


def repeated_key_names():
    names = key_names()
    literal = re.compile(r"\"\.?(\w+)\"")
    found = []
    for path in sources(outside_config=False):
        text = path.read_text()
        table_rows = re.compile(r"_key(?:<[^>]*>)?\(\s*\"\w+\"")
        for number, line in enumerate(text.splitlines(), 1):
            if table_rows.search(line) or line.lstrip().startswith("//"):
                continue
            for name in literal.findall(line):
                if name in names and path.is_relative_to(SRC / "config"):
                    found.append(f"{path.relative_to(ROOT)}:{number}: key name \"{name}\" written again")
    return found


def main():
    limit = MAX_REPEATED
    if "--max-repeated" in sys.argv:
        limit = int(sys.argv[sys.argv.index("--max-repeated") + 1])
    bad = string_comparisons()
    for line in bad:
        print(line)
    repeated = repeated_key_names()
    if len(repeated) > limit:
        for line in repeated:
            print(line)
        print(f"{len(repeated)} key names written outside their table (at most {limit})")
    print(f"config strings compared outside src/config: {len(bad)}; key names written again: {len(repeated)} "
          f"(at most {limit})")
    return 1 if bad or len(repeated) > limit else 0


if __name__ == "__main__":
    sys.exit(main())
