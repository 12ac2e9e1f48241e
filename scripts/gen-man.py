#!/usr/bin/env python3
"""Generates the man pages from the sources they document, so that they cannot drift:
  sluice.toml(5) from docs/configuration.md (every section, key table and paragraph);
  sluice(8) from `sluice --help` (every subcommand and signal) plus deploy/man/sluice.8.in.
Usage: gen-man.py SLUICE_BINARY OUT_DIR"""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSION_RX = re.compile(r"sluice (\S+)")


def esc(text):
    """Plain text as roff: backslashes, hyphens that are minus signs, and no leading control
    characters."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return text


def inline(md):
    """Markdown inline markup as roff: `code` bold, **strong** bold, [text](link) text."""
    out = []
    md = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", md)
    for part in re.split(r"(`[^`]*`)", md):
        if part.startswith("`") and part.endswith("`") and len(part) >= 2:
            out.append("\\fB" + esc(part[1:-1]) + "\\fR")
        else:
            part = esc(part)
            part = re.sub(r"\*\*([^*]+)\*\*", r"\\fB\1\\fR", part)
            out.append(part)
    return "".join(out)


def line(text):
    """One output line; a leading . or ' would be read as a request."""
    return "\\&" + text if text[:1] in (".", "'") else text


def cells(row):
    """The cells of one markdown table row. A `\\|` inside a cell is a literal bar (GitHub's
    table syntax), not a cell boundary: split on unescaped bars only, then unescape."""
    inner = row.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", inner)]


def table(rows):
    """A markdown table (header first) as a tagged paragraph per row: the first column is the
    tag, the others follow as "header: value"."""
    header = cells(rows[0])
    out = []
    for row in rows[2:]:
        row_cells = cells(row)
        out.append(".TP")
        out.append(line(inline(row_cells[0])))
        details = "; ".join(f"{h}: {inline(c)}" for h, c in zip(header[1:-1], row_cells[1:-1]) if c)
        if details:
            # One full stop: a cell that ends a sentence already has its own.
            out.append(line(details if details.endswith(".") else details + "."))
            out.append(".br")
        out.append(line(inline(row_cells[-1])))
    return out


def markdown(md, skip_title=True):
    """Headings, paragraphs, bullet lists, code blocks and tables of our docs as roff."""
    out, lines, i = [], md.splitlines(), 0
    while i < len(lines):
        l = lines[i]
        if l.startswith("# ") and skip_title:
            i += 1
            continue
        if l.startswith("<!--"):  # a marker for generators, not text
            i += 1
            continue
        if l.startswith("```"):
            j = i + 1
            out += [".PP", ".nf", ".RS 4"]
            while j < len(lines) and not lines[j].startswith("```"):
                out.append(line(esc(lines[j])))
                j += 1
            out += [".RE", ".fi"]
            i = j + 1
            continue
        if l.startswith("## "):
            out.append('.SH "' + inline(l[3:]).upper().replace('"', "") + '"')
        elif l.startswith("### "):
            out.append('.SS "' + inline(l[4:]).replace('"', "") + '"')
        elif l.startswith("|"):
            j = i
            while j < len(lines) and lines[j].startswith("|"):
                j += 1
            out += table(lines[i:j])
            i = j
            continue
        elif l.startswith("- "):
            out += [".IP \\(bu 2", line(inline(l[2:]))]
        elif l.startswith("  ") and out and l.strip():
            out.append(line(inline(l.strip())))
        elif not l.strip():
            out.append(".PP")
        else:
            out.append(line(inline(l)))
        i += 1
    # Collapse runs of paragraph breaks.
    cleaned = []
    for o in out:
        if o == ".PP" and cleaned and cleaned[-1] in (".PP", ".TP"):
            continue
        cleaned.append(o)
    return cleaned


def header(name, section, version, title):
    return [f'.TH {name.upper()} {section} "" "sluice {version}" "{title}"']


def sluice_toml(version):
    md = (ROOT / "docs" / "configuration.md").read_text()
    out = header("sluice.toml", 5, version, "File Formats")
    # No hyphenation: key names, values and paths are searched for as written.
    out.append(".nh")
    out += [".SH NAME", "sluice.toml \\- configuration file of the sluice load balancer",
            ".SH DESCRIPTION"]
    out += markdown(md)
    out += [".SH FILES", "/etc/sluice/sluice.toml", ".SH SEE ALSO", "\\fBsluice\\fR(8)"]
    return out


def sluice_8(binary, version):
    usage = subprocess.run([binary, "--help"], capture_output=True, text=True, check=True).stdout
    lines = usage.splitlines()
    out = header("sluice", 8, version, "System Administration")
    out += [".SH NAME", "sluice \\- " + esc(lines[0].split(" - ", 1)[1])]
    out += [".SH SYNOPSIS", ".nf"]
    body, notes = [], []
    # `sluice --help`: "Usage:" then commands (two-space indent, continuation lines deeper), then
    # paragraphs (admin target, signals).
    in_usage = False
    for l in lines[1:]:
        if l.startswith("Usage:"):
            in_usage = True
            continue
        if in_usage and l.startswith("  "):
            body.append(l)
            continue
        in_usage = False
        if l.strip():
            notes.append(l)
    # Entries: (command, description lines). A continuation line that starts with "[" carries
    # more of the command's options.
    entries = []
    for l in body:
        text = l.strip()
        if not l.startswith("    "):
            parts = re.split(r"\s{2,}", text, maxsplit=1)
            entries.append([parts[0], parts[1:]])
        elif text.startswith("[") and entries:
            parts = re.split(r"\s{2,}", text, maxsplit=1)
            entries[-1][0] += " " + parts[0]
            entries[-1][1] += parts[1:]
        elif entries:
            entries[-1][1].append(text)
    out += [line(esc(cmd)) for cmd, _ in entries]
    out += [".fi", ".SH COMMANDS"]
    for cmd, desc in entries:
        out += [".TP", line("\\fB" + esc(cmd) + "\\fR")]
        out += [line(esc(d)) for d in desc]
    signals = [n for n in notes if n.startswith("Signals:")]
    others = [n for n in notes if not n.startswith("Signals:")]
    out += [".SH DESCRIPTION"] + [line(esc(n)) for n in others]
    out += [".SH SIGNALS"] + [line(esc(n[len("Signals: "):])) for n in signals]
    out += (ROOT / "deploy" / "man" / "sluice.8.in").read_text().splitlines()
    return out


def main():
    binary, out_dir = sys.argv[1], Path(sys.argv[2])
    out_dir.mkdir(parents=True, exist_ok=True)
    version = VERSION_RX.search(
        subprocess.run([binary, "--version"], capture_output=True, text=True, check=True).stdout).group(1)
    (out_dir / "sluice.toml.5").write_text("\n".join(sluice_toml(version)) + "\n")
    (out_dir / "sluice.8").write_text("\n".join(sluice_8(binary, version)) + "\n")


if __name__ == "__main__":
    main()
