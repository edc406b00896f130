#!/usr/bin/env python3
"""Adds the Python source of the installed packages of the running interpreter to a corpus made
by prepare_data.py (1bit-small's data; standard library only). On the GPU machine that is its
image's PyTorch environment: torch, transformers, scipy, sympy, jax, ... need no upload.

Only packages whose metadata names licenses that allow redistribution without conditions beyond
keeping the notice (MIT, BSD, Apache 2.0, PSF, ISC, ...) are read; a package that names any
other license (GPL, LGPL, MPL, proprietary, unknown) is left out whole, and so is a file whose
header names the GPL, and vendored copies of other projects. Files are deduplicated by content
(whitespace at line ends ignored), generated and minified files are skipped.

  package_corpus.py DATA_DIR

Appends to DATA_DIR/{pretrain,chat}_{train,test}.jsonl (source "packages"; chat pairs of kind
"code" as prepare_data.py makes them, held-out ones with their whole docstring, for the doctest
evaluation), and writes DATA_DIR/packages.json (every package seen: version, license, whether
it was used, files and characters kept) and DATA_DIR/package-licenses.txt (the license files of
every package used). 1% of the files are held out, by prepare_data.is_test.
"""

import ast
import hashlib
import importlib.metadata as md
import json
import multiprocessing
import os
import re
import sys

from prepare_data import function_pairs, is_test

# SPDX-style names (and the words metadata uses for them) of the licenses allowed.
PERMISSIVE = {
    "mit": "MIT", "mit-cmu": "MIT-CMU", "expat": "MIT", "mit-0": "MIT-0",
    "bsd": "BSD", "new bsd": "BSD-3-Clause", "modified bsd": "BSD-3-Clause", "simplified bsd": "BSD-2-Clause",
    "bsd-2-clause": "BSD-2-Clause", "bsd 2-clause": "BSD-2-Clause", "2-clause bsd": "BSD-2-Clause",
    "bsd-3-clause": "BSD-3-Clause", "bsd 3-clause": "BSD-3-Clause", "3-clause bsd": "BSD-3-Clause",
    "bsd-3-clause-clear": "BSD-3-Clause-Clear", "bsd-2-clause-views": "BSD-2-Clause-Views", "0bsd": "0BSD",
    "apache-2.0": "Apache-2.0", "apache 2.0": "Apache-2.0", "apache 2": "Apache-2.0", "apache-2": "Apache-2.0",
    "apache software": "Apache-2.0", "apache": "Apache-2.0", "apache, 2.0": "Apache-2.0", "apache v2": "Apache-2.0",
    "apache license 2.0": "Apache-2.0", "apache software 2.0": "Apache-2.0",
    "psf-2.0": "PSF-2.0", "python software foundation": "PSF-2.0", "psf": "PSF-2.0", "python-2.0": "PSF-2.0",
    "isc": "ISC", "iscl": "ISC", "unlicense": "Unlicense", "zlib": "Zlib", "zlib/libpng": "Zlib",
    "cc0-1.0": "CC0-1.0", "cc0 1.0 universal": "CC0-1.0", "hpnd": "HPND",
    "historical permission notice and disclaimer": "HPND", "public domain": "public domain",
}


def normalized(name):
    """'The Apache Software License, Version 2.0 (ASL)' -> 'apache software 2.0'."""
    n = re.sub(r"\([^)]*\)", " ", name.lower())
    n = re.sub(r"\b(the|licen[cs]es?|version|v(?=\d))\b", " ", n)
    return re.sub(r"\s+", " ", n.replace(",", " ")).strip(" .;:-")


NOT_PERMISSIVE = re.compile(r"\b(L?GPL|AGPL|GNU|MPL|Mozilla|EPL|Eclipse|CDDL|proprietary|commercial|"
                            r"NVIDIA|other/proprietary|SSPL|BUSL|CC-BY-NC|copyleft)\b", re.I)
VENDORED = re.compile(r"(^|/)(_vendor|vendor|vendored|_vendored|extern|_extern|third_party|thirdparty)/")
GENERATED = re.compile(r"(DO NOT EDIT|[Aa]uto-?generated|[Gg]enerated by|automatically generated)")


def license_of(dist):
    """(SPDX-style expression or None, why): None when any named license is not permissive or none
    is named in a recognisable way."""
    meta = dist.metadata
    expr = meta.get("License-Expression")
    names = []
    if expr:
        names = [t for t in re.split(r"\s+(?:AND|OR|WITH)\s+|[()]", expr) if t.strip()]
    classifiers = [c.split("::")[-1].strip() for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    names += [c for c in classifiers if c not in ("OSI Approved",)]
    field = (meta.get("License") or "").strip()
    if not names and field and len(field) < 80:
        names = [t for t in re.split(r"\s+(?:and|or|AND|OR)\s+|[/;,]\s*|\s*\+\s*", field) if t.strip()]
    elif not names and field:
        # A whole license text in the field: recognise the common ones by their words.
        if "Permission is hereby granted, free of charge" in field:
            names = ["MIT"]
        elif "Redistribution and use in source and binary forms" in field:
            names = ["BSD"]
        elif "Apache License" in field and "Version 2.0" in field:
            names = ["Apache-2.0"]
    if not names:
        return None, "no license named"
    spdx = []
    for n in names:
        if NOT_PERMISSIVE.search(n):
            return None, f"names {n}"
        key = normalized(n)
        if key not in PERMISSIVE:
            return None, f"unrecognised license {n!r}"
        spdx.append(PERMISSIVE[key])
    return " AND ".join(sorted(set(spdx))), "ok"


def license_files(dist):
    out = []
    for f in dist.files or []:
        base = os.path.basename(str(f)).upper()
        if base.startswith(("LICENSE", "LICENCE", "COPYING", "NOTICE", "AUTHORS")) and not str(f).endswith(".py"):
            try:
                out.append((str(f), f.read_text(encoding="utf-8")))
            except (OSError, UnicodeDecodeError):
                pass
    return out


def usable(source):
    """Code a person wrote: parses, no GPL header, not generated, not minified, not a data table."""
    if len(source) < 200 or len(source) > 400_000:
        return False
    head = source[:3000]
    if re.search(r"GNU (Lesser |Library )?General Public License|\bL?GPL(v\d)?\b", head) or GENERATED.search(head):
        return False
    lines = source.split("\n")
    if max(len(l) for l in lines) > 400 or len(source) / len(lines) > 80:
        return False
    return True


def digest_of(source):
    return hashlib.sha256("\n".join(l.rstrip() for l in source.split("\n")).encode()).digest()


DISTS = []  # filled before the worker processes fork


def read_package(i):
    """One package: its record and, when its license allows, its usable files as
    (document name, source, content digest, chat pairs), in path order."""
    dist = DISTS[i]
    name = dist.metadata["Name"]
    spdx, why = license_of(dist)
    rec = {"name": name, "version": dist.version, "license": spdx, "used": False, "why": why,
           "files": 0, "chars": 0, "skipped": 0}
    items = []
    if spdx is None:
        return rec, items, []
    for f in sorted(str(p) for p in dist.files or []):
        if not f.endswith(".py") or f.startswith("..") or VENDORED.search(f):
            continue
        try:
            source = open(os.path.join(str(dist.locate_file("")), f), encoding="utf-8").read()
            tree = ast.parse(source)
        except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError, MemoryError):
            rec["skipped"] += 1
            continue
        if not usable(source):
            rec["skipped"] += 1
            continue
        doc = f"packages:{name}/{f}"
        items.append((doc, source, digest_of(source), list(function_pairs(source, tree, doc))))
    return rec, items, license_files(dist) if items else []


def main():
    data = sys.argv[1]
    # The corpus's own code (the standard library) counts as seen: packages vendor parts of it.
    seen_content = set()
    for split in ("train", "test"):
        with open(os.path.join(data, f"pretrain_{split}.jsonl"), encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                if r["source"] == "code":
                    seen_content.add(digest_of(r["text"]))
    by_name = {}
    for d in md.distributions():
        n = (d.metadata["Name"] or "").lower()
        if n and n not in by_name:  # the first on the path is the one imported
            by_name[n] = d
    DISTS.extend(by_name[n] for n in sorted(by_name))
    out = {name: open(os.path.join(data, name), "a", encoding="utf-8")
           for name in ("pretrain_train.jsonl", "pretrain_test.jsonl", "chat_train.jsonl", "chat_test.jsonl")}
    licenses = open(os.path.join(data, "package-licenses.txt"), "w", encoding="utf-8")
    counts = {"files": [0, 0], "chars": [0, 0], "pairs": [0, 0], "duplicates": 0, "skipped": 0}
    packages = []
    with multiprocessing.Pool() as pool:
        for rec, items, texts in pool.imap(read_package, range(len(DISTS))):
            packages.append(rec)
            counts["skipped"] += rec.pop("skipped")
            for doc, source, digest, pairs in items:
                if digest in seen_content:
                    counts["duplicates"] += 1
                    continue
                seen_content.add(digest)
                t = is_test(doc, "packages")
                out["pretrain_test.jsonl" if t else "pretrain_train.jsonl"].write(
                    json.dumps({"id": doc, "source": "packages", "text": source}, ensure_ascii=False) + "\n")
                counts["files"][t] += 1
                counts["chars"][t] += len(source)
                rec["files"] += 1
                rec["chars"] += len(source)
                for pair_name, pair_doc, kind, prompt, answer, docstring in pairs:
                    record = {"id": pair_name, "doc": pair_doc, "kind": kind,
                              "messages": [{"role": "user", "content": prompt},
                                           {"role": "assistant", "content": answer}]}
                    if t:
                        record["docstring"] = docstring
                    out["chat_test.jsonl" if t else "chat_train.jsonl"].write(
                        json.dumps(record, ensure_ascii=False) + "\n")
                    counts["pairs"][t] += 1
            if rec["files"]:
                rec["used"] = True
                licenses.write(f"==== {rec['name']} {rec['version']} ({rec['license']}) ====\n")
                for path, text in texts:
                    licenses.write(f"---- {path}\n{text.strip()}\n\n")
                if not texts:
                    licenses.write("(no license file in the distribution; its metadata names the license above)\n\n")
    for f in out.values():
        f.close()
    licenses.close()
    used = [p for p in packages if p["used"]]
    with open(os.path.join(data, "packages.json"), "w") as f:
        json.dump({"python": sys.version.split()[0], "prefix": sys.prefix, "counts": counts, "packages": packages},
                  f, indent=1)
    print(f"package_corpus: {len(used)} of {len(packages)} packages used, {counts['files'][0]}+{counts['files'][1]} "
          f"files ({counts['chars'][0] / 1e6:.1f}+{counts['chars'][1] / 1e6:.1f} M characters, train+test), "
          f"{counts['pairs'][0]}+{counts['pairs'][1]} docstring pairs, {counts['duplicates']} duplicate files, "
          f"{counts['skipped']} skipped", file=sys.stderr)


if __name__ == "__main__":
    main()
