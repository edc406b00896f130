#!/usr/bin/env python3
"""Builds the 1bit-tiny training corpus from text that Debian packages ship (CPU machine,
standard library only).

Sources (each redistributable, see models/MODEL_CARD.md):
  code   the Python 3.11 standard library source      (libpython3.11-stdlib, PSF License)
  docs   the Python 3.11 documentation sources        (python3.11-doc, PSF License)
  words  WordNet 3.0 glosses                           (wordnet-base, WordNet License)
  bible  the King James Version                        (bible-kjv-text, public domain)

Output in OUT (default models/train/data):
  pretrain_{train,test}.jsonl  {"id", "source", "text"}: plain documents
  chat_{train,test}.jsonl    {"id", "kind", "messages"}: docstring -> function, "define X" -> gloss,
                             "Quote Book C:V" -> verse, a documentation heading -> its text
  stats.json                 counts and sizes per source and split
The split is fixed by a hash of each item's name, so it does not depend on file order, and
about 2% of every source is held out (never trained on).

  models/train/prepare_data.py [--out DIR]
"""

import argparse
import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap

STDLIB = "/usr/lib/python3.11"
DOC_SOURCES = "/usr/share/doc/python3.11/html/_sources"
WORDNET = "/usr/share/wordnet"
# Held-out share of each source's documents; the code's is larger because the evaluation asks 50
# held-out docstring prompts, and a module holds only a few documented functions.
TEST_PERCENT = {"code": 5, "docs": 2, "words": 2, "bible": 2, "packages": 1}  # packages: package_corpus.py


def is_test(name, source):
    """The held-out split: ~2% of the documents, chosen by a stable hash of their name. A chat pair
    goes with the document it was cut from, so no held-out answer sits inside a training document."""
    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % 100 < TEST_PERCENT[source]


def stdlib_files():
    skip = re.compile(r"/(test|tests|idle_test|site-packages|dist-packages|lib2to3/tests)/")
    for root, dirs, files in os.walk(STDLIB):
        dirs.sort()
        for f in sorted(files):
            path = os.path.join(root, f)
            if f.endswith(".py") and not skip.search(path + "/"):
                yield path


def function_pairs(source, tree, doc):
    """Docstring -> function chat pairs of one module: (name, doc, kind, prompt, answer, docstring)
    for every public function of 3 to 40 lines whose docstring opens with a summary of at least
    20 characters; the prompt is that summary, the answer the function's source."""
    raw = None  # the source's lines as UTF-8, since the tree's column offsets count bytes
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        docstring = ast.get_docstring(node)
        if not docstring or node.name.startswith("_"):
            continue
        if raw is None:
            raw = [l.encode() for l in re.split(r"\r\n|\r|\n", source)]
        first, last = node.lineno - 1, node.end_lineno - 1
        if first == last:
            segment = raw[first][node.col_offset:node.end_col_offset].decode()
        else:
            segment = b"\n".join([raw[first][node.col_offset:], *raw[first + 1:last],
                                  raw[last][:node.end_col_offset]]).decode()
        if not segment:
            continue
        code = textwrap.dedent(" " * node.col_offset + segment)
        lines = code.count("\n") + 1
        if lines < 3 or lines > 40:
            continue
        try:
            ast.parse(code)
        except SyntaxError:
            continue
        summary = docstring.strip().split("\n\n")[0].strip()
        if len(summary) < 20:
            continue
        prompt = f"Write a Python function `{node.name}`: {summary}"
        yield (f"{doc}:{node.lineno}:{node.name}", doc, "code", prompt, code, docstring)


def code_items():
    """Modules as pretraining documents; documented functions as chat pairs."""
    docs, pairs = [], []
    for path in stdlib_files():
        rel = os.path.relpath(path, STDLIB)
        try:
            source = open(path, encoding="utf-8").read()
            tree = ast.parse(source)
        except (UnicodeDecodeError, SyntaxError):
            continue
        if "\t" in source:
            continue
        docs.append(("code:" + rel, source))
        pairs += [p[:5] for p in function_pairs(source, tree, "code:" + rel)]
    return docs, pairs


ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`<]*?)(?:\s*<[^>]*>)?`")
DIRECTIVE = re.compile(r"^\.\. (module|moduleauthor|sectionauthor|index|highlight|toctree|testsetup|testcleanup|"
                       r"currentmodule|versionadded|versionchanged|deprecated|seealso|note|warning|impl-detail|"
                       r"audit-event|availability|only|raw|include|literalinclude|rubric|_[^:]*)::.*$")


def clean_rst(text):
    """Readable prose from reStructuredText: roles become their text, markup lines go."""
    text = ROLE.sub(r"\1", text)
    out = []
    for line in text.split("\n"):
        if DIRECTIVE.match(line.strip()) or re.fullmatch(r"\s*:[a-z-]+:.*", line):
            continue
        if re.fullmatch(r"[=\-~^*#+`'\".]{4,}", line.strip()):
            continue
        out.append(line.rstrip())
    return re.sub(r"\n{3,}", "\n\n", "\n".join(out)).strip()


def docs_items():
    docs, pairs = [], []
    for root, dirs, files in os.walk(DOC_SOURCES):
        dirs.sort()
        for f in sorted(files):
            if not f.endswith(".rst.txt"):
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(path, DOC_SOURCES)
            raw = open(path, encoding="utf-8").read()
            text = clean_rst(raw)
            if len(text) < 200:
                continue
            docs.append(("docs:" + rel, text))
            # A heading (a line underlined by =, - or ~) and the paragraph after it.
            lines = raw.split("\n")
            for i in range(len(lines) - 2):
                title, rule = lines[i].strip(), lines[i + 1].strip()
                if not title or not re.fullmatch(r"[=\-~]{3,}", rule) or len(rule) < len(title):
                    continue
                body = clean_rst("\n".join(lines[i + 2:i + 40]))
                para = body.split("\n\n")[0].strip() if body else ""
                title = clean_rst(title)
                if 80 <= len(para) <= 1200 and not para.startswith(("..", "::")):
                    pairs.append((f"docs:{rel}:{i}", "docs:" + rel, "docs",
                                  f"What does the Python documentation say about {title}?", para))
    return docs, pairs


POS = {"n": "noun", "v": "verb", "a": "adjective", "s": "adjective", "r": "adverb"}


def wordnet_items():
    """Glosses by word: "define X" -> its senses, as a numbered list when there are several."""
    senses = {}
    for part in ("noun", "verb", "adj", "adv"):
        for line in open(os.path.join(WORDNET, "data." + part), encoding="latin-1"):
            if line.startswith("  "):
                continue
            head, _, gloss = line.partition("|")
            fields = head.split()
            pos, count = fields[2], int(fields[3], 16)
            words = [fields[4 + 2 * i].replace("_", " ") for i in range(count)]
            gloss = gloss.strip()
            for w in words:
                w = re.sub(r"\([a-z]+\)$", "", w)  # adjective markers such as (a)
                senses.setdefault(w, []).append((POS[pos], gloss))
    docs, pairs = [], []
    lines = []
    for word in sorted(senses):
        entries = senses[word][:4]
        if len(entries) == 1:
            answer = f"{word} ({entries[0][0]}): {entries[0][1]}"
        else:
            answer = "\n".join(f"{i + 1}. {word} ({p}): {g}" for i, (p, g) in enumerate(entries))
        pairs.append(("words:" + word, f"words:chunk{len(lines) // 200}", "define", f"define {word}", answer))
        lines.append(answer)
    # Pretraining text: the dictionary in chunks of 200 entries, each chunk one document.
    for i in range(0, len(lines), 200):
        docs.append((f"words:chunk{i // 200}", "\n".join(lines[i:i + 200])))
    return docs, pairs


BOOKS = ("Genesis Exodus Leviticus Numbers Deuteronomy Joshua Judges Ruth 1Samuel 2Samuel 1Kings 2Kings "
         "1Chronicles 2Chronicles Ezra Nehemiah Esther Job Psalms Proverbs Ecclesiastes Song Isaiah Jeremiah "
         "Lamentations Ezekiel Daniel Hosea Joel Amos Obadiah Jonah Micah Nahum Habakkuk Zephaniah Haggai "
         "Zechariah Malachi Matthew Mark Luke John Acts Romans 1Corinthians 2Corinthians Galatians Ephesians "
         "Philippians Colossians 1Thessalonians 2Thessalonians 1Timothy 2Timothy Titus Philemon Hebrews James "
         "1Peter 2Peter 1John 2John 3John Jude Revelation").split()
NAMES = {"Song": "Song of Solomon"}


def bible_items():
    out = subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], capture_output=True, text=True, check=True).stdout
    verses = []  # (book index, "Book C:V", text)
    book = -1
    last_abbrev = None
    for line in out.split("\n"):
        m = re.match(r"^(\S+?)(\d+):(\d+) (.*)$", line)
        if m:
            abbrev, chap, verse, text = m.groups()
            if abbrev != last_abbrev:
                book, last_abbrev = book + 1, abbrev
            name = NAMES.get(BOOKS[book], BOOKS[book])
            name = re.sub(r"^(\d)", r"\1 ", name)
            verses.append([book, f"{name} {chap}:{verse}", text.strip()])
        elif line.strip() and verses:
            verses[-1][2] += " " + line.strip()  # a verse that -f wrapped onto the next line
    if len(verses) != 31102:
        sys.exit(f"prepare_data: expected 31102 verses from bible, got {len(verses)}")
    docs, pairs = [], []
    by_chapter = {}
    for b, ref, text in verses:
        by_chapter.setdefault(ref.rsplit(":", 1)[0], []).append(f"{ref.rsplit(':', 1)[1]} {text}")
        pairs.append(("bible:" + ref, "bible:" + ref.rsplit(":", 1)[0], "verse", f"Quote {ref}.", text))
    for chapter, lines in by_chapter.items():
        docs.append(("bible:" + chapter, chapter + "\n" + "\n".join(lines)))
    return docs, pairs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "data"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    stats = {}
    files = {name: open(os.path.join(args.out, name), "w", encoding="utf-8")
             for name in ("pretrain_train.jsonl", "pretrain_test.jsonl", "chat_train.jsonl", "chat_test.jsonl")}
    for source, build in (("code", code_items), ("docs", docs_items), ("words", wordnet_items), ("bible", bible_items)):
        docs, pairs = build()
        s = stats.setdefault(source, {"docs": [0, 0], "doc_chars": [0, 0], "pairs": [0, 0]})
        for name, text in docs:
            t = is_test(name, source)
            record = {"id": name, "source": source, "text": text}
            files["pretrain_test.jsonl" if t else "pretrain_train.jsonl"].write(json.dumps(record, ensure_ascii=False) + "\n")
            s["docs"][t] += 1
            s["doc_chars"][t] += len(text)
        for name, doc, kind, prompt, answer in pairs:
            t = is_test(doc, source)
            record = {"id": name, "doc": doc, "kind": kind,
                      "messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}]}
            files["chat_test.jsonl" if t else "chat_train.jsonl"].write(json.dumps(record, ensure_ascii=False) + "\n")
            s["pairs"][t] += 1
        print(f"prepare_data: {source}: {s['docs'][0]}+{s['docs'][1]} documents, "
              f"{s['pairs'][0]}+{s['pairs'][1]} chat pairs (train+test)", file=sys.stderr)
    for f in files.values():
        f.close()
    with open(os.path.join(args.out, "stats.json"), "w") as f:
        json.dump(stats, f, indent=1)


if __name__ == "__main__":
    main()
