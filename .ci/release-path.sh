#!/usr/bin/env bash
# The release path end to end, on this machine: build the release archive as
# .github/workflows/release.yml does, write dist/checksums.txt as its publish job does (into a
# temporary copy of the action, never the committed file), serve the archive over HTTP
# (python3's http.server), install it through scripts/install-action.sh with checksum
# verification, check the installed binary pins itself in `dagexec init`, and check a tampered
# archive is refused.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

case "$(uname -s)/$(uname -m)" in
  Linux/x86_64) target=x86_64-unknown-linux-gnu ;;
  Linux/aarch64) target=aarch64-unknown-linux-gnu ;;
  *) echo "release-path: no release target for $(uname -s)/$(uname -m)" >&2; exit 1 ;;
esac
version="v0.0.0-ci"
commit="$(git rev-parse HEAD 2>/dev/null || echo 0000000000000000000000000000000000000000)"
work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [[ -n "$server_pid" ]]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# Where cargo puts it: CARGO_TARGET_DIR or a configured target-dir, as cargo resolves them.
if [[ "${DAGEXEC_RELEASE_PATH_PROFILE:-release}" == dev ]]; then
  # .ci/run's quick form: the dev profile for the host, in a target directory it seeded with
  # the tests' dependencies, so only dagexec itself compiles. What this script checks (the tag
  # and commit baked in, the archive, its checksum, the install, a tampered archive refused)
  # does not depend on the profile; ci.yml's release-path job runs release.yml's own commands.
  echo "== release-path: build $version for $target (dev profile: .ci/run's quick form)"
  DAGEXEC_RELEASE_TAG="$version" DAGEXEC_RELEASE_COMMIT="$commit" cargo build --locked --bin dagexec
  built="$(bash .ci/target-dir.sh)/debug"
else
  echo "== release-path: build $version for $target (as release.yml's build job)"
  # The same commands as release.yml (rustup target add is a no-op for the host target).
  DAGEXEC_RELEASE_TAG="$version" DAGEXEC_RELEASE_COMMIT="$commit" \
    cargo build --release --locked --target "$target"
  built="$(bash .ci/target-dir.sh)/$target/release"
fi
out="$work/out"
mkdir -p "$out"
asset="dagexec-$version-$target.tar.gz"
tar -czf "$out/$asset" -C "$built" dagexec
(cd "$out" && sha256sum "$asset" > "$asset.sha256")

echo "== release-path: pin the checksums (as release.yml's publish job, in a copy of the action)"
action="$work/action"
mkdir -p "$action"
cp -R action.yml scripts dist "$action/"
cat "$out"/*.sha256 | LC_ALL=C sort -k2 > "$out/checksums.txt"
{
  sed '/^# version:/d' dist/checksums.txt | grep '^#' || true
  echo "# version: $version"
  cat "$out/checksums.txt"
} > "$action/dist/checksums.txt"
git diff --quiet -- dist/checksums.txt || { echo "release-path: the committed dist/checksums.txt changed" >&2; exit 1; }

echo "== release-path: serve the release assets over HTTP"
srv="$work/srv"
mkdir -p "$srv/$version"
cp "$out/$asset" "$srv/$version/"
python3 - "$srv" "$work/port" <<'PY' &
import functools, http.server, os, sys
srv, portfile = sys.argv[1], sys.argv[2]
class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass
handler = functools.partial(Quiet, directory=srv)
httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
with open(portfile + ".tmp", "w") as f:
    f.write(str(httpd.server_address[1]))
os.replace(portfile + ".tmp", portfile)
httpd.serve_forever()
PY
server_pid=$!
for _ in $(seq 1 200); do [[ -s "$work/port" ]] && break; sleep 0.05; done
base="http://127.0.0.1:$(cat "$work/port")"

install() { # $1: a fresh tool cache; the output file is $1/github-output
  mkdir -p "$1"
  env -u CARGO -u RUSTUP_TOOLCHAIN \
    GITHUB_ACTION_PATH="$action" GITHUB_OUTPUT="$1/github-output" \
    DAGEXEC_ACTION_REPOSITORY=org/dagexec DAGEXEC_RELEASE_BASE_URL="$base" \
    DAGEXEC_TOOL_CACHE="$1" \
    bash "$action/scripts/install-action.sh"
}

echo "== release-path: install the release through scripts/install-action.sh"
install "$work/cache-good" | tee "$work/good.log"
grep -q "as dist/checksums.txt pins" "$work/good.log"
bin="$(sed -n 's/^bin=//p' "$work/cache-good/github-output")"
[[ "$bin" == "$work/cache-good/dagexec/$version/$target/dagexec" ]] || { echo "release-path: installed $bin, not the release asset" >&2; exit 1; }
"$bin" init --stdout --worker claude > "$work/init.yml"
grep -q "uses: org/dagexec@$commit # $version\$" "$work/init.yml" \
  || { echo "release-path: the release binary does not pin its own commit and tag:" >&2; grep 'uses: org/dagexec' "$work/init.yml" >&2; exit 1; }

echo "== release-path: a tampered archive is refused"
tampered="$work/tampered"
mkdir -p "$tampered"
tar -xzf "$out/$asset" -C "$tampered"
printf '\n# tampered\n' >> "$tampered/dagexec"
tar -czf "$srv/$version/$asset" -C "$tampered" dagexec
if install "$work/cache-bad" > "$work/bad.log" 2>&1; then
  cat "$work/bad.log"
  echo "release-path: a tampered archive was installed" >&2
  exit 1
fi
grep -q "refusing to run it" "$work/bad.log" || { cat "$work/bad.log"; exit 1; }
if [[ -e "$work/cache-bad/dagexec/$version/$target/dagexec" ]]; then
  echo "release-path: the tampered binary was left in the tool cache" >&2
  exit 1
fi
cd "$root"
echo "== release-path: ok (installed $version with a matching checksum; refused a tampered archive)"
