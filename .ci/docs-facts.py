#!/usr/bin/env python3
"""Checks that moving text between README.md and the guide (docs/src/) lost no fact.

Usage: .ci/docs-facts.py OLD.md [NEW.md ...]
  e.g. .ci/docs-facts.py <(git show 61755ac:README.md)     # the README before the guide
NEW defaults to README.md and every docs/src/*.md. From OLD it takes, as facts: every flag
(`--x`, `-d`), every NAME_IN_CAPITALS (environment variables, secrets), every backticked
span, every number with the word after it, every URL and every heading's text. Each must
appear somewhere in NEW (whitespace and line breaks ignored; a heading may be any text, and
a heading "A, B" split into pages counts when A and B each appear).
Prints the missing ones and exits 1 if any; also prints how many of OLD's sentences
survive word for word (for information only: sentences may be reworded).
"""

import pathlib
import re
import sys


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def facts(text: str) -> dict[str, set[str]]:
    flat = norm(text)
    # Fenced code keeps its own lines: take numbers from it too, with the same rules.
    out: dict[str, set[str]] = {
        "flag": set(re.findall(r"(?<![\w-])--?[a-zA-Z][\w-]*", flat)),
        "NAME": set(re.findall(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b", flat)),
        "`code`": {m.strip() for m in re.findall(r"(?<!`)`([^`]+)`(?!`)", flat) if m.strip()},
        "number": set(re.findall(r"(?<![\w.])\d[\d,.]*\d?%?(?: [A-Za-z]+)?", flat)),
        "url": set(re.findall(r"https?://[^\s)>`'\"]+", flat)),
        "heading": {
            m.strip("# ").strip() for m in re.findall(r"^#+ .*$", text, flags=re.M)
        },
    }
    # A number at a sentence's end keeps its final dot out.
    out["number"] = {n.rstrip(".,") for n in out["number"]}
    return out


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    old = pathlib.Path(sys.argv[1]).read_text(encoding="utf-8")
    news = sys.argv[2:] or ["README.md", *sorted(map(str, pathlib.Path("docs/src").glob("*.md")))]
    new_text = "\n".join(pathlib.Path(p).read_text(encoding="utf-8") for p in news)
    hay = norm(new_text)
    hay_lower = hay.lower()
    missing = []
    counted = 0
    for kind, items in facts(old).items():
        for item in sorted(items):
            counted += 1
            if kind == "heading":  # a heading split into pages: each part of it is found
                found = all(part.strip().lower() in hay_lower for part in item.split(","))
            else:
                found = norm(item) in hay
            if not found:
                missing.append((kind, item))
    sentences = [s for s in re.split(r"(?<=[.;:])\s+", norm(old)) if len(s) > 40]
    kept = sum(1 for s in sentences if s in hay)
    for kind, item in missing:
        print(f"missing {kind}: {item}")
    print(
        f"{counted - len(missing)}/{counted} facts of {sys.argv[1]} found in {len(news)} files; "
        f"{kept}/{len(sentences)} sentences word for word"
    )
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
