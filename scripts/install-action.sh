#!/usr/bin/env bash
# Installs the dagexec binary for the action's own ref.
#
#   install-action.sh locate   what to install: step outputs mode (release|source), dir (where
#                              the binary goes: the path actions/cache keeps for a source build)
#                              and key (the cache key: platform, profile and a hash of the source)
#   install-action.sh          install it; step outputs `bin` (the binary's path), `build` (its
#                              SHA-256) and `fresh` (true when this job built or downloaded it)
#   install-action.sh agent-user   the work job's unprivileged user (below)
#   install-action.sh egress-cleanup   the egress firewall's chains a stopped dagexec left (below)
#
# A released ref (dist/checksums.txt names a version and a SHA-256 per platform) downloads the
# release asset and checks it against the pinned SHA-256, refusing a mismatch; the checked
# archive is kept beside the binary, and a binary already there is run only after its archive
# is checked again and the binary extracted from it afresh. Anything else (a fork, a branch, a
# commit without a release, `uses: ./`) builds the action's own source with cargo, once.
#
# A source build already present (restored by actions/cache, or left by an earlier job on a
# self-hosted runner) may have been put there by task code: a work job that became root can
# save a cache entry in the execution branch's scope, which actions/cache prefers. It is run
# only when its SHA-256 is the one pinned by the trusted job that started this run
# (DAGEXEC_BUILD_SHA256, the action's `build` input) or, with no pin, when this job runs on
# the default branch (GITHUB_REF is refs/heads/$DAGEXEC_DEFAULT_BRANCH). Otherwise it is
# removed with a warning that says why, and built afresh (with cargo).
#
# Environment: DAGEXEC_ACTION_REPOSITORY (github.action_repository; empty for `uses: ./`),
# DAGEXEC_BUILD_SHA256 (the pin; empty for none), DAGEXEC_DEFAULT_BRANCH
# (github.event.repository.default_branch), DAGEXEC_TOOL_CACHE (where binaries are kept;
# default the runner's tool cache), DAGEXEC_RELEASE_BASE_URL (where release assets are
# downloaded from; default $GITHUB_SERVER_URL/<repository>/releases/download; the release-path
# CI serves a local copy), DAGEXEC_BUILD_PROFILE=dev (an unoptimised source build, for the
# action's own tests).
set -euo pipefail

mode_arg="${1:-install}"

# install-action.sh agent-user: the work job's unprivileged user (issue 35), `dagexec-agent`,
# made with a home of its own and no sudo; step outputs `user` (its name) and `sudo` (true
# when dagexec must be started through sudo to be root, so it can start the agent as the
# user), or `why` when it cannot be made here (not Linux, neither root nor sudo, useradd
# failed): the job goes on as before and its summary says so.
if [[ "$mode_arg" == agent-user ]]; then
  agent=dagexec-agent
  say() { echo "$1" >>"${GITHUB_OUTPUT:-/dev/stdout}"; }
  if [[ "$(uname -s)" != Linux ]]; then
    say "why=the runner is not Linux ($(uname -s))"
    exit 0
  fi
  as_root=()
  if [[ "$(id -u)" != 0 ]]; then
    if sudo -n true 2>/dev/null; then
      as_root=(sudo -n)
    else
      say "why=the runner's user is not root and has no sudo without a password"
      exit 0
    fi
  fi
  if ! id -u "$agent" >/dev/null 2>&1; then
    if ! "${as_root[@]}" useradd --create-home --user-group --shell /bin/sh "$agent" 2>&1; then
      say "why=useradd $agent failed"
      exit 0
    fi
  fi
  home="$(getent passwd "$agent" | cut -d: -f6)"
  if [[ -z "$home" || ! -d "$home" ]]; then
    say "why=$agent has no home folder"
    exit 0
  fi
  # Its git trusts the checkout it is given (the top folder stays the runner's).
  printf '[safe]\n\tdirectory = *\n' | "${as_root[@]}" tee "$home/.gitconfig" >/dev/null
  "${as_root[@]}" chown "$agent:" "$home/.gitconfig"
  say "user=$agent"
  if [[ ${#as_root[@]} -gt 0 ]]; then
    say "sudo=true"
  fi
  exit 0
fi
# install-action.sh egress-cleanup: the work job's `egress` firewall (issue 35) is a chain per
# job, DAGEXEC-EGRESS-<pid of its dagexec>, which dagexec removes when task code is done; a
# dagexec killed first leaves it, restricting the agent's user. This removes every such
# chain whose dagexec no longer runs, and the jumps to it, for IPv4 and IPv6.
if [[ "$mode_arg" == egress-cleanup ]]; then
  as_root=()
  if [[ "$(id -u)" != 0 ]]; then
    sudo -n true 2>/dev/null || exit 0
    as_root=(sudo -n)
  fi
  for tool in iptables ip6tables; do
    command -v "$tool" >/dev/null || continue
    rules="$("${as_root[@]}" "$tool" -w -S 2>/dev/null)" || continue
    while read -r chain; do
      [[ -n "$chain" && ! -d "/proc/${chain#DAGEXEC-EGRESS-}" ]] || continue
      while read -r _ rule; do
        read -ra args <<<"$rule"
        "${as_root[@]}" "$tool" -w -D "${args[@]}" || true
      done < <(grep -E -- "^-A [^ ]+ .*-j $chain\$" <<<"$rules" | grep -v -- "^-A $chain ")
      "${as_root[@]}" "$tool" -w -F "$chain" || true
      "${as_root[@]}" "$tool" -w -X "$chain" || true
      echo "removed the egress chain $chain ($tool) that a stopped dagexec left"
    done < <(sed -n 's/^-N \(DAGEXEC-EGRESS-[0-9]*\)$/\1/p' <<<"$rules")
  done
  exit 0
fi
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

# The SHA-256 of a file. OpenSSL's uses the processor's SHA instructions where it has them,
# several times faster than coreutils' on a source build of hundreds of MB (each job pays it).
sha256() {
  local sum=""
  if command -v openssl >/dev/null 2>&1; then
    sum="$(openssl dgst -sha256 -r "$1" 2>/dev/null | awk '{print $1}')" || sum=""
  fi
  [[ "$sum" =~ ^[0-9a-f]{64}$ ]] || sum="$(sha256sum "$1" 2>/dev/null | awk '{print $1}')" || sum=""
  [[ "$sum" =~ ^[0-9a-f]{64}$ ]] || sum="$(shasum -a 256 "$1" | awk '{print $1}')"
  echo "$sum"
}

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

pin="${DAGEXEC_BUILD_SHA256:-}"
if [[ -n "$pin" && ! "$pin" =~ ^[0-9a-f]{64}$ ]]; then
  echo "::error title=dagexec install::the build input ($pin) is not a SHA-256 (64 lower-case hex digits); it is set by dagexec's own jobs only"
  exit 1
fi
default_branch="${DAGEXEC_DEFAULT_BRANCH:-}"
on_default=false
[[ -n "$default_branch" && "${GITHUB_REF:-}" == "refs/heads/$default_branch" ]] && on_default=true

# Moves `dir` aside and removes it: a binary not to run is never run, by this job or a later one.
discard() {
  local gone="$1.untrusted-$$"
  if mv -T "$1" "$gone" 2>/dev/null; then
    rm -rf "$gone"
  else
    rm -rf "$1"
  fi
}

fresh=false
# The SHA-256 of the binary this job runs, once known: a present build checked against the pin
# is not read again.
build=""
if [[ "$mode" == release ]]; then
  bin="$dir/dagexec"
  archive="$dir/$asset"
  # Whatever is in the tool cache is run only as extracted from an archive checked now.
  if [[ -f "$archive" && "$(sha256 "$archive")" == "$expected" ]]; then
    echo "$asset: SHA-256 $expected, as dist/checksums.txt pins (kept from an earlier job)"
  else
    if [[ -e "$dir" ]]; then
      echo "::warning title=dagexec install::$dir holds no $asset with the SHA-256 dist/checksums.txt pins ($expected); not running what is there: downloading afresh"
      discard "$dir"
    fi
    mkdir -p "$dir"
    url="$base_url/$version/$asset"
    echo "Downloading $url"
    curl --fail --silent --show-error --location --retry 3 --output "$archive" "$url"
    actual="$(sha256 "$archive")"
    if [[ "$actual" != "$expected" ]]; then
      echo "::error title=dagexec install::$asset has SHA-256 $actual, but dist/checksums.txt pins $expected; refusing to run it"
      rm -f "$archive"
      exit 1
    fi
    echo "$asset: SHA-256 $actual, as dist/checksums.txt pins"
    fresh=true
  fi
  # Extracted beside it and renamed into place: a job of a shared tool cache never finds it
  # missing or half written.
  fresh_dir="$(mktemp -d "$dir/.extract-XXXXXX")"
  tar -xzf "$archive" -C "$fresh_dir" dagexec
  mv -f "$fresh_dir/dagexec" "$bin"
  rm -rf "$fresh_dir"
else
  bin="$dir/bin/dagexec"
  if [[ -e "$dir" ]]; then
    present="$( [[ -f "$bin" ]] && sha256 "$bin" || echo none)"
    if [[ -n "$pin" && "$present" == "$pin" ]]; then
      echo "Using the dagexec built earlier from this source ($dir): SHA-256 $present, as this run was started with"
      build="$present"
    elif [[ -z "$pin" && "$on_default" == true && -x "$bin" ]]; then
      echo "Using the dagexec built earlier from this source ($dir): this job runs on the default branch ($default_branch), whose cache scope no task code writes"
      build="$present"
    else
      if [[ -n "$pin" ]]; then
        why="its SHA-256 is $present, not the $pin this run was started with (a trusted job built or checked that one)"
      else
        why="this run was started with no build pin (the \`build\` input: a workflow written by an older \`dagexec init\` passes none; run it again) and does not run on the default branch, whose cache scope is the only one task code cannot write"
      fi
      echo "::warning title=dagexec install::not running the dagexec build found in $dir (restored from the Actions cache, or left on this runner): $why. Task code of an earlier job can leave a binary there; removing it and building afresh."
      discard "$dir"
    fi
  fi
  if [[ ! -x "$bin" ]]; then
    # No release asset for this ref and no trusted build of this source: build it.
    if ! command -v cargo >/dev/null 2>&1; then
      echo "::error title=dagexec install::no release asset for this ref, no trusted build of its source, and no cargo to build one; use a released, pinned ref (see \`dagexec init\`) or install Rust first"
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
    fresh=true
  fi
fi
[[ -n "$build" ]] || build="$(sha256 "$bin")"
"$bin" --version
echo "dagexec build: SHA-256 $build"
{ echo "bin=$bin"; echo "build=$build"; echo "fresh=$fresh"; } >> "${GITHUB_OUTPUT:-/dev/null}"
