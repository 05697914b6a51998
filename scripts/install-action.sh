#!/usr/bin/env bash
# Installs the dagexec binary for the action's own ref.
#
#   install-action.sh locate   what to install: step outputs mode (release|source), dir (where
#                              the binary goes: the path actions/cache keeps for a source build)
#                              and key (the cache key: platform, profile and a hash of the source)
#   install-action.sh          install it; prints the binary's path as the step output `bin`
#
# A released ref (dist/checksums.txt names a version and a SHA-256 per platform) downloads the
# release asset and checks it against the pinned SHA-256, refusing a mismatch. Anything else (a
# fork, a branch, a commit without a release, `uses: ./`) builds the action's own source with
# cargo, once: an existing binary for the same source (restored by actions/cache, or left by an
# earlier job on a self-hosted runner) is used as it is, with or without cargo on the machine.
#
# Environment: DAGEXEC_ACTION_REPOSITORY (github.action_repository; empty for `uses: ./`),
# DAGEXEC_TOOL_CACHE (where binaries are kept; default the runner's tool cache),
# DAGEXEC_RELEASE_BASE_URL (where release assets are downloaded from; default
# $GITHUB_SERVER_URL/<repository>/releases/download; the release-path CI serves a local copy),
# DAGEXEC_BUILD_PROFILE=dev (an unoptimised source build, for the action's own tests).
set -euo pipefail

mode_arg="${1:-install}"
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

sha256() { sha256sum "$1" 2>/dev/null | awk '{print $1}' || shasum -a 256 "$1" | awk '{print $1}'; }

cache="${DAGEXEC_TOOL_CACHE:-${RUNNER_TOOL_CACHE:-${RUNNER_TEMP:-/tmp}}}/dagexec"
checksums="$action_path/dist/checksums.txt"
version=""
expected=""
asset=""
if [[ -f "$checksums" ]]; then
  version="$(sed -n 's/^# version: *//p' "$checksums" | head -n1)"
  asset="dagexec-${version}-${target}.tar.gz"
  expected="$(awk -v a="$asset" '$2 == a { print $1 }' "$checksums")"
fi
base_url="${DAGEXEC_RELEASE_BASE_URL:-}"
if [[ -z "$base_url" && -n "$repo" ]]; then
  base_url="${GITHUB_SERVER_URL:-https://github.com}/$repo/releases/download"
fi

profile_name="${DAGEXEC_BUILD_PROFILE:-release}"
if [[ -n "$base_url" && -n "$version" && -n "$target" && -n "$expected" ]]; then
  mode=release
  dir="$cache/$version/$target"
  key=""
else
  mode=source
  # The files the binary is built from (those of them this copy of the action has).
  sources=()
  for f in Cargo.lock Cargo.toml build.rs src templates examples/demo; do
    [[ -e "$action_path/$f" ]] && sources+=("$f")
  done
  src_id="$(cd "$action_path" && find "${sources[@]}" -type f -print0 \
    | LC_ALL=C sort -z | xargs -0 cat | sha256sum | cut -c1-16)"
  dir="$cache/source-$profile_name-$src_id"
  key="dagexec-source-${target:-$os-$arch}-$profile_name-$src_id"
fi

if [[ "$mode_arg" == locate ]]; then
  echo "dagexec: $mode install into $dir${key:+ (cache key $key)}"
  { echo "mode=$mode"; echo "dir=$dir"; echo "key=$key"; } >> "${GITHUB_OUTPUT:-/dev/null}"
  exit 0
fi

if [[ "$mode" == release ]]; then
  if [[ ! -x "$dir/dagexec" ]]; then
    mkdir -p "$dir"
    url="$base_url/$version/$asset"
    echo "Downloading $url"
    curl --fail --silent --show-error --location --retry 3 --output "$dir/$asset" "$url"
    actual="$(sha256 "$dir/$asset")"
    if [[ "$actual" != "$expected" ]]; then
      echo "::error title=dagexec install::$asset has SHA-256 $actual, but dist/checksums.txt pins $expected; refusing to run it"
      rm -f "$dir/$asset"
      exit 1
    fi
    echo "$asset: SHA-256 $actual, as dist/checksums.txt pins"
    tar -xzf "$dir/$asset" -C "$dir" dagexec
    rm -f "$dir/$asset"
  fi
  bin="$dir/dagexec"
else
  bin="$dir/bin/dagexec"
  if [[ -x "$bin" ]]; then
    echo "Using the dagexec built earlier from this source ($dir)"
  else
    # No release asset for this ref and no earlier build of this source: build it.
    if ! command -v cargo >/dev/null 2>&1; then
      echo "::error title=dagexec install::no release asset for this ref, no cached build of its source, and no cargo to build one; use a released, pinned ref (see \`dagexec init\`) or install Rust first"
      exit 1
    fi
    profile=()
    [[ "$profile_name" == dev ]] && profile=(--debug)
    mkdir -p "$cache"
    (
      # Jobs sharing a tool cache (self-hosted runners) build once, one at a time.
      if command -v flock >/dev/null 2>&1; then flock 9; fi
      if [[ ! -x "$bin" ]]; then
        echo "Building dagexec from $action_path (no release asset for this ref)"
        cargo install --quiet --locked "${profile[@]}" --path "$action_path" --root "$dir" --force
      fi
    ) 9>"$cache/build.lock"
  fi
fi
"$bin" --version
echo "bin=$bin" >> "${GITHUB_OUTPUT:-/dev/null}"
