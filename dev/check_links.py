#!/usr/bin/env python3
"""Checks the links of the project's documentation, from the checkout's root:

- every relative markdown link [text](path#anchor) in README.md, docs/, dev/, models/, kernels/ and patches/ names an
  existing file or folder, and an anchor into a markdown file names one of its headings;
- every docs/runs/... path written anywhere in those files (and in scripts/ and dev/) exists;
- every file a docs/runs/*/README.md names in the first column of its tables exists in its
  folder (names with * are globs; abbreviations such as `.err` or `-v5.log` and patterns such as
  `pp-N-SETTING.json` are skipped).

Prints each broken reference as FILE:LINE: what, and exits 1 if there is any.

    python3 dev/check_links.py
"""
import glob
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
DOC_GLOBS = ["README.md", "docs/**/*.md", "dev/**/*.md", "models/**/*.md", "kernels/**/*.md", "patches/**/*.md"]
PATH_GLOBS = DOC_GLOBS + ["scripts/*", "dev/*"]

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
RUNS_PATH = re.compile(r"docs/runs/[A-Za-z0-9._/*-]+")


def files(patterns):
    seen = []
    for pattern in patterns:
        for f in sorted(glob.glob(os.path.join(ROOT, pattern), recursive=True)):
            if os.path.isfile(f) and f not in seen:
                seen.append(f)
    return seen


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path):
    found, counts, fenced = set(), {}, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                fenced = not fenced
            m = None if fenced else re.match(r"^#{1,6} (.*)$", line)
            if not m:
                continue
            s = slug(m.group(1))
            n = counts.get(s, 0)
            counts[s] = n + 1
            found.add(s if n == 0 else f"{s}-{n}")
    return found


def main():
    problems = []
    rel = lambda p: os.path.relpath(p, ROOT)

    for doc in files(DOC_GLOBS):
        with open(doc, encoding="utf-8") as f:
            lines = f.read().split("\n")
        for no, line in enumerate(lines, 1):
            if line.startswith("    "):  # an indented code block
                continue
            for target in LINK.findall(line):
                if re.match(r"^[a-z]+:", target):
                    continue
                path, _, anchor = target.partition("#")
                full = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
                if not os.path.exists(full):
                    problems.append(f"{rel(doc)}:{no}: link to a missing {path}")
                elif anchor and full.endswith(".md") and anchor not in anchors(full):
                    problems.append(f"{rel(doc)}:{no}: no heading #{anchor} in {rel(full)}")

    for doc in files(PATH_GLOBS):
        try:
            with open(doc, encoding="utf-8") as f:
                lines = f.read().split("\n")
        except UnicodeDecodeError:
            continue
        for no, line in enumerate(lines, 1):
            for path in RUNS_PATH.findall(line):
                path = path.rstrip(".")
                if not glob.glob(os.path.join(ROOT, path)):
                    problems.append(f"{rel(doc)}:{no}: {path} does not exist")

    for readme in files(["docs/runs/*/README.md"]):
        folder = os.path.dirname(readme)
        with open(readme, encoding="utf-8") as f:
            lines = f.read().split("\n")
        for no, line in enumerate(lines, 1):
            if not line.startswith("| `"):
                continue
            first = line.split("|")[1]
            for name in re.findall(r"`([^`]+)`", first):
                if name.startswith(("-", ".")) or "/" in name or " " in name or "." not in name:
                    continue
                if re.search(r"(^|[-_.])[A-Z]+(?=[-_.]|$)", name) and not name.startswith("README"):
                    continue  # a pattern such as pp-N-SETTING.json
                if not glob.glob(os.path.join(folder, name)):
                    problems.append(f"{rel(readme)}:{no}: {name} is not in the folder")

    for p in problems:
        print(p)
    print(f"check_links: {len(problems)} broken reference(s)" if problems else "check_links: all references resolve")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
