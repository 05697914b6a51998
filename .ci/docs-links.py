#!/usr/bin/env python3
"""Checks the links of the user guide and of README.md; run by .ci/docs.sh after `mdbook build`.

Usage: .ci/docs-links.py BOOK_DIR   (the built book, docs/book; run from the repository's top)

- Every page of the built book (one per docs/src/*.md): each relative href or src must name a
  file of the book, and its #fragment an id on that page (mdBook turns `x.md#a` into
  `x.html#a`, so this checks the links and anchors between the guide's pages as the reader
  meets them). Links with a scheme (https:, mailto:) are not fetched.
- README.md, SECURITY.md, ARCHITECTURE.md: each relative Markdown link must name a file of the
  repository; a link into docs/src/X.md#a must find the id `a` on the book's page X.html; one
  into another Markdown file must find a heading with that GitHub anchor.
Prints every broken link as FILE: TARGET (why) and exits 1 if there is any.
"""

import html.parser
import pathlib
import re
import sys
import urllib.parse

SKIP_PAGES = {"print.html", "toc.html", "404.html"}  # generated from the pages themselves


class Page(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("id", "name") and value:
                self.ids.add(value)
            if name in ("href", "src") and value:
                self.links.append(value)


def parse(path: pathlib.Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def github_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings (lowercase, punctuation dropped)."""
    anchors, seen = set(), {}
    in_fence = False
    for line in markdown.splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
        m = None if in_fence else re.match(r"#{1,6} (.*)", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    book = pathlib.Path(sys.argv[1])
    broken: list[str] = []
    pages: dict[pathlib.Path, Page] = {}

    def page(path: pathlib.Path) -> Page:
        path = path.resolve()
        if path not in pages:
            pages[path] = parse(path)
        return pages[path]

    sources = sorted(pathlib.Path("docs/src").glob("*.md"))
    checked = 0
    for src in sources:
        if src.name == "SUMMARY.md":
            continue
        html_file = book / (src.stem + ".html")
        if not html_file.is_file():
            broken.append(f"{src}: no page {html_file} in the built book (missing from SUMMARY.md?)")
            continue
        for link in page(html_file).links:
            url = urllib.parse.urlsplit(link)
            if url.scheme or link.startswith("//"):
                continue
            checked += 1
            target = html_file if not url.path else (html_file.parent / urllib.parse.unquote(url.path))
            if not target.exists():
                broken.append(f"{src}: {link} (no such file in the book)")
            elif url.fragment and target.suffix == ".html" and url.fragment not in page(target).ids:
                broken.append(f"{src}: {link} (no #{url.fragment} on {target.name})")

    for md in ("README.md", "SECURITY.md", "ARCHITECTURE.md"):
        text = pathlib.Path(md).read_text(encoding="utf-8")
        text = re.sub(r"```.*?```", "", text, flags=re.S)  # links in code are not links
        for link in re.findall(r"\]\(([^)\s]+)\)", text):
            url = urllib.parse.urlsplit(link)
            if url.scheme:
                continue
            checked += 1
            target = pathlib.Path(md).parent / urllib.parse.unquote(url.path) if url.path else pathlib.Path(md)
            if not target.exists():
                broken.append(f"{md}: {link} (no such file)")
                continue
            if not url.fragment:
                continue
            rel = target.resolve().relative_to(pathlib.Path.cwd().resolve())
            if rel.parts[:2] == ("docs", "src") and rel.suffix == ".md":
                ids = page(book / rel.with_suffix(".html").name).ids
            else:
                ids = github_anchors(target.read_text(encoding="utf-8"))
            if url.fragment not in ids:
                broken.append(f"{md}: {link} (no #{url.fragment} in {rel})")

    for b in broken:
        print(f"broken link: {b}")
    print(f"docs links: {checked} checked, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
