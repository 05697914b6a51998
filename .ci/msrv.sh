#!/usr/bin/env bash
# The MSRV check: dagexec builds with the `rust-version` its Cargo.toml declares.
#   1. No package in Cargo.lock declares a `rust-version` above ours (cargo metadata).
#   2. A fresh resolve, as `cargo install dagexec` without --locked or a `cargo update` makes
#      it (CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback), passes the same check: a
#      dependency that declares no rust-version can pull in one that needs a newer Rust.
#      Needs crates.io; skipped with a warning when it cannot be reached.
#   3. The crate compiles: with the MSRV toolchain when rustup has it (GitHub's CI job `msrv`
#      installs it), else with the toolchain at hand (`cargo check`; clippy's
#      incompatible_msrv lint, run by .ci/run, flags std APIs newer than the MSRV). With
#      DAGEXEC_MSRV_CHECKED_BY=clippy (.ci/run, after its clippy) that check is not repeated.
# Needs cargo and python3. Run from .ci/run, or alone: bash .ci/msrv.sh
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# Reads `cargo metadata` JSON on stdin; prints one line per package whose rust-version is
# above $1 ("name version rust-version"), nothing when all fit.
above_msrv() {
  python3 -c '
import json, sys

def key(v):
    parts = [int(p) for p in v.split(".")]
    return parts + [0] * (3 - len(parts))

msrv = key(sys.argv[1])
meta = json.load(sys.stdin)
for p in sorted(meta["packages"], key=lambda p: (p["name"], p["version"])):
    rv = p.get("rust_version")
    if rv and key(rv) > msrv:
        print(p["name"], p["version"], rv)
' "$1"
}

msrv="$(cargo metadata --no-deps --format-version 1 --locked | python3 -c '
import json, sys
pkgs = [p for p in json.load(sys.stdin)["packages"] if p["name"] == "dagexec"]
print(pkgs[0].get("rust_version") or "")
')"
if [[ -z "$msrv" ]]; then
  echo "error: Cargo.toml declares no rust-version; add one under [package] (e.g. rust-version = \"1.88\")" >&2
  exit 1
fi
echo "== MSRV: dagexec declares rust-version $msrv"

report() { # $1: where, $2: offending lines
  echo "error: $1 holds packages that need a newer Rust than dagexec's rust-version $msrv:" >&2
  while read -r name version rv; do
    echo "  $name $version declares rust-version $rv" >&2
  done <<<"$2"
  echo "Fix: raise rust-version in Cargo.toml to the highest of these (and the msrv job's toolchain" >&2
  echo "in .github/workflows/ci.yml), or pin an older release: cargo update -p NAME --precise VERSION" >&2
  echo "(see which dependency pulls it in: cargo tree -i NAME)." >&2
}

echo "== MSRV: every package in Cargo.lock fits rust-version $msrv"
bad="$(cargo metadata --format-version 1 --locked | above_msrv "$msrv")"
if [[ -n "$bad" ]]; then
  report "Cargo.lock" "$bad"
  exit 1
fi

echo "== MSRV: a fresh resolve (as cargo install without --locked) fits rust-version $msrv"
fresh="$(mktemp -d)"
trap 'rm -rf "$fresh"' EXIT
cp Cargo.toml "$fresh/"
mkdir -p "$fresh/src"
: >"$fresh/src/lib.rs"
echo 'fn main() {}' >"$fresh/src/main.rs"
if meta="$(cd "$fresh" && CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback cargo metadata --format-version 1 2>"$fresh/err")"; then
  bad="$(above_msrv "$msrv" <<<"$meta")"
  if [[ -n "$bad" ]]; then
    report "a fresh resolve of Cargo.toml" "$bad"
    exit 1
  fi
else
  echo "warning: skipped, cannot resolve the dependencies afresh (is crates.io reachable?):" >&2
  tail -n 3 "$fresh/err" >&2
fi

# rustup names it `1.88-<host>` or `1.88.0-<host>`, as it was installed.
toolchain=""
if command -v rustup >/dev/null 2>&1; then
  toolchain="$(rustup toolchain list 2>/dev/null | awk '{print $1}' | grep -E "^${msrv//./\\.}(\.0)?-" | head -n 1 || true)"
fi
if [[ -n "$toolchain" ]]; then
  echo "== MSRV: cargo +$toolchain check --locked --all-targets"
  cargo "+$toolchain" check --locked --all-targets
elif [[ "${DAGEXEC_MSRV_CHECKED_BY:-}" == clippy ]]; then
  # .ci/run's clippy has just checked every target with this same toolchain: a `cargo check`
  # here would compile the crate a second time to learn nothing more.
  echo "== MSRV: Rust $msrv is not installed here; the crate was checked by clippy with $(rustc --version)"
  echo "   (GitHub's CI job msrv builds with Rust $msrv itself)"
else
  echo "== MSRV: Rust $msrv is not installed here; checking with $(rustc --version) and the lockfile checks above"
  echo "   (GitHub's CI job msrv builds with Rust $msrv itself)"
  CARGO_RESOLVER_INCOMPATIBLE_RUST_VERSIONS=fallback cargo check --locked --all-targets
fi
echo "== MSRV: ok (rust-version $msrv)"
