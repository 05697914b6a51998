#!/usr/bin/env bash
# Installs the dagexec binary for the action's own ref. A released ref (dist/checksums.txt
# names a version and a SHA-256 per platform) downloads the release asset and checks it
# against the pinned SHA-256; anything else (a fork, a branch, `uses: ./`) builds the
# action's own source with cargo. Prints the binary's path as the step output `bin`.
set -euo pipefail

action_path="${GITHUB_ACTION_PATH:?run this from the action}"
repo="${DAGEXEC_ACTION_REPOSITORY:-}"
os="$(uname -s)"
arch="$(uname -m)"
case "$os/$arch" in
  Linux/x86_64) target=x86_64-unknown-linux-gnu ;;
  Linux/aarch64 | Linux/arm64) target=aarch64-unknown-linux-gnu ;;
  Darwin/x86_64) target=x86_64-apple-darwin ;;
  Darwin/arm64) target=aarch64-apple-darwin ;;
  *) target="" ;;
esac

# DAGEXEC_TOOL_CACHE: a cache shared beyond one runner's tool cache (the action's own tests).
cache="${DAGEXEC_TOOL_CACHE:-${RUNNER_TOOL_CACHE:-${RUNNER_TEMP:-/tmp}}}/dagexec"
checksums="$action_path/dist/checksums.txt"
version=""
expected=""
if [[ -f "$checksums" ]]; then
  version="$(sed -n 's/^# version: *//p' "$checksums" | head -n1)"
  asset="dagexec-${version}-${target}.tar.gz"
  expected="$(awk -v a="$asset" '$2 == a { print $1 }' "$checksums")"
fi

if [[ -n "$repo" && -n "$version" && -n "$target" && -n "$expected" ]]; then
  dir="$cache/$version/$target"
  if [[ ! -x "$dir/dagexec" ]]; then
    mkdir -p "$dir"
    url="${GITHUB_SERVER_URL:-https://github.com}/$repo/releases/download/$version/$asset"
    echo "Downloading $url"
    curl --fail --silent --show-error --location --retry 3 --output "$dir/$asset" "$url"
    actual="$(sha256sum "$dir/$asset" 2>/dev/null | awk '{print $1}' || shasum -a 256 "$dir/$asset" | awk '{print $1}')"
    if [[ "$actual" != "$expected" ]]; then
      echo "::error title=dagexec install::$asset has SHA-256 $actual, but dist/checksums.txt pins $expected; refusing to run it"
      rm -f "$dir/$asset"
      exit 1
    fi
    tar -xzf "$dir/$asset" -C "$dir"
    rm -f "$dir/$asset"
  fi
  bin="$dir/dagexec"
else
  # No release asset for this ref: build the action's own source.
  if ! command -v cargo >/dev/null 2>&1; then
    echo "::error title=dagexec install::no release asset for this ref and no cargo to build one; use a released tag (org/dagexec@v1) or install Rust first"
    exit 1
  fi
  src_id="$(cd "$action_path" && find Cargo.lock Cargo.toml src templates examples/demo -type f -print0 \
    | LC_ALL=C sort -z | xargs -0 cat | sha256sum | cut -c1-16)"
  dir="$cache/source-$src_id"
  profile=()
  # DAGEXEC_BUILD_PROFILE=dev builds unoptimised (the action's own tests); release otherwise.
  [[ "${DAGEXEC_BUILD_PROFILE:-release}" == dev ]] && profile=(--debug)
  mkdir -p "$cache"
  (
    # Jobs sharing a tool cache (self-hosted runners) build once, one at a time.
    if command -v flock >/dev/null 2>&1; then flock 9; fi
    if [[ ! -x "$dir/bin/dagexec" ]]; then
      echo "Building dagexec from $action_path (no release asset for this ref)"
      cargo install --quiet --locked "${profile[@]}" --path "$action_path" --root "$dir" --force
    fi
  ) 9>"$cache/build.lock"
  bin="$dir/bin/dagexec"
fi
"$bin" --version
echo "bin=$bin" >> "$GITHUB_OUTPUT"
