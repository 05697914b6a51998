#!/usr/bin/env bash
# The user guide (docs/, an mdBook): builds it into docs/book/ and checks its links, and
# README.md's links into it (.ci/docs-links.py: pages, anchors, files). Run by .ci/run.
# mdBook comes from crates.io (no Debian package), without its default features (serve, watch,
# search: not needed to build), into .ci/tools/mdbook; a matching version there is reused.
# DAGEXEC_TOOLS_DIR overrides the prefix, as for .ci/install-tools.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

mdbook_version=0.5.4
prefix="${DAGEXEC_TOOLS_DIR:-$PWD/.ci/tools}/mdbook"
mdbook="$prefix/bin/mdbook"
# Built unoptimised and without debug information (`--debug`, CARGO_PROFILE_DEV_DEBUG): 71 s
# of CPU instead of 182 s for the release profile, and the book still builds in 0.2 s.
if [[ ! -x "$mdbook" || "$("$mdbook" --version)" != "mdbook v$mdbook_version" ]]; then
  echo "== installing mdbook $mdbook_version into $prefix (cargo install --debug: 40 s on 2 idle cores, 71 s of CPU)"
  CARGO_PROFILE_DEV_DEBUG=false cargo install mdbook --version "=$mdbook_version" --locked \
    --no-default-features --debug --quiet --root "$prefix"
fi

echo "== the user guide: mdbook build docs, then its links and README.md's"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
"$mdbook" build docs >"$log" 2>&1 || { cat "$log"; exit 1; }
# mdBook only warns about broken Markdown (an unclosed HTML tag swallows text): a warning fails.
if grep -E 'WARN|ERROR' "$log"; then
  echo "error: mdbook warned about docs/ (above); fix the page it names" >&2
  exit 1
fi
python3 .ci/docs-links.py docs/book
