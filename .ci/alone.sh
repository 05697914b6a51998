#!/usr/bin/env bash
# Runs a command with nothing beside the repository, as on a user's fresh clone: in a private
# mount namespace the repository's parent directory is replaced by an empty one that holds only
# the repository, so a test that reads a sibling directory (the specification folder, say) fails here instead of on a
# user's machine. Needs unshare(1) and the right to mount (root, or user namespaces); where those
# are missing it says so and runs the command as it is (tests/it/self_contained.rs still refuses
# such reads statically). cargo's target directory stays where it is when it lies beside the
# repository (CARGO_TARGET_DIR=../targets/x): it is the build, not a sibling a test may read.
#   .ci/alone.sh cargo test --locked
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd -P)"
parent="$(dirname "$repo")"
target="$(bash "$repo/.ci/target-dir.sh")"
mkdir -p "$target"
target="$(cd "$target" && pwd -P)"
# The target directory to bind back over the hidden parent: only one beside the repository.
case "$target/" in
  "$repo"/*) target="" ;;
  "$parent"/*) ;;
  *) target="" ;;
esac

can_hide() {
  [[ "$parent" != "/" ]] && command -v unshare >/dev/null 2>&1 \
    && { unshare --mount true 2>/dev/null || unshare --mount --map-root-user true 2>/dev/null; }
}
if ! can_hide; then
  echo "== alone: cannot hide the repository's siblings here (no unshare/mount rights); running as is" >&2
  exec "$@"
fi

flags=(--mount)
unshare --mount true 2>/dev/null || flags=(--mount --map-root-user)
# Places for the bind mounts that the hidden parent does not cover.
place() {
  local base real
  for base in "${TMPDIR:-/tmp}" /var/tmp /dev/shm "$HOME"; do
    real="$(cd "$base" 2>/dev/null && pwd -P)" || continue
    case "$real/" in
      "$parent"/*) continue ;;
    esac
    mktemp -d -p "$base" 2>/dev/null && return 0
  done
  return 1
}
if ! keep="$(place)" || { [[ -n "$target" ]] && ! keep_target="$(place)"; }; then
  echo "== alone: no place outside $parent for the bind mount; running as is" >&2
  exec "$@"
fi
# shellcheck disable=SC2016 # expanded by the inner shell
exec unshare "${flags[@]}" bash -euo pipefail -c '
  repo="$1" parent="$2" keep="$3" target="$4" keep_target="$5"; shift 5
  mount --make-rprivate /
  mount --bind "$repo" "$keep"
  [[ -z "$target" ]] || mount --bind "$target" "$keep_target"
  mount -t tmpfs -o mode=755 dagexec-alone "$parent"
  mkdir -p "$repo"
  mount --bind "$keep" "$repo"
  if [[ -n "$target" ]]; then
    mkdir -p "$target"
    mount --bind "$keep_target" "$target"
  fi
  cd "$repo"
  echo "== alone: $parent holds only $(basename "$repo")${target:+ and the target directory $target} for: $*" >&2
  exec "$@"
' alone "$repo" "$parent" "$keep" "$target" "${keep_target:-}" "$@"
