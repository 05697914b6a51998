#!/usr/bin/env bash
# bench/artifact_zip.sh — peak memory of the conductor fetching and reading a work job's
# artifact (issue 20 §4).
#
# What it measures
#   The python below writes three archives and serves them over HTTP as GitHub does: the API
#   path (/repos/o/r/actions/artifacts/1/zip) answers a redirect to a storage URL, which
#   serves the file with its length (and refuses a request that carries a token).
#     many    the three entries, then ENTRIES empty stored entries (default 1,000,000: ~95
#             MiB, zip64, 1,000,003 entries in all)
#     large   ~250 MiB (LARGE_MIB): result.json, a small changes.patch and a worker.log of
#             LOG_MIB (default 32, its bound), the rest data that no entry names (a stray
#             local entry), so the archive nears the 256 MiB download limit
#     full    each entry at its bound: result.json 8 MiB, changes.patch 128 MiB, worker.log
#             32 MiB (~168 MiB) — what the conductor keeps of an artifact, not just reads
#             (the patch goes to a temporary file, the log's last 4 MiB are kept)
#   examples/artifact_zip_rss.rs then runs, each in its own process:
#     download   the conductor's path: Client::download_artifact (the API, its redirect,
#                the storage's body streamed into an anonymous temporary file), then
#                actions::conduct::read_zip of that file
#     dagexec    read_zip of the archive's file alone
#     zip-crate  the archive read into memory and handed whole to the zip crate (how the
#                conductor read it before); only with ZIP_CRATE=1 (590 MB for `many`)
#   and prints the peak RSS (VmHWM) — "before it" is the process with its runtime and client
#   set up. It REPORTS, it does not gate. PROFILE=release builds optimised (memory differs
#   little from the default debug build, which the tests' target dir already holds).
#   ARCHIVES="many large" picks archives.
set -euo pipefail
cd "$(dirname "$0")/.."
ENTRIES=${ENTRIES:-1000000}
LARGE_MIB=${LARGE_MIB:-250}
LOG_MIB=${LOG_MIB:-32}
PROFILE=${PROFILE:-dev}
tmp=$(mktemp -d)
server=
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
python3 - "$tmp" "$ENTRIES" "$LARGE_MIB" "$LOG_MIB" "${ARCHIVES:-many large full}" <<'PY'
import json, struct, sys, zlib

tmp, extra, large_mib, log_mib, which = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split()
MIB = 1 << 20

def result(output="COMPLETED: ok\n"):
    return json.dumps({
        "version": 1, "task": 0, "attempt": 1, "round": 1, "base": "0" * 40,
        "output": output, "exit": {"kind": "success"}, "durationMs": 1,
        "present": [], "changed": [], "acceptance": None,
    }).encode()

def write(path, files, stray=0):
    """A zip of stored `files` (name, data), zip64 end records; `stray` bytes of a local
    entry that the central directory does not name come first."""
    count = len(files)
    with open(path, "wb") as f:
        pos, central = 0, bytearray()
        if stray:
            name = b"stray"
            f.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0x800, 0, 0, 0x21, 0,
                                stray, stray, len(name), 0) + name)
            block = b"s" * MIB
            for _ in range(stray // MIB):
                f.write(block)
            f.write(b"s" * (stray % MIB))
            pos = f.tell()
        for name, data in files:
            crc = zlib.crc32(data)
            f.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0x800, 0, 0, 0x21, crc,
                                len(data), len(data), len(name), 0) + name)
            f.write(data)
            central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x314, 20, 0x800, 0, 0,
                                   0x21, crc, len(data), len(data), len(name), 0, 0, 0, 0,
                                   0o100644 << 16, pos) + name
            pos = f.tell()
        cd_offset, cd_size = pos, len(central)
        f.write(central)
        eocd64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count, count,
                             cd_size, cd_offset)
        f.write(eocd64)
        f.write(struct.pack("<IIQI", 0x07064B50, 0, cd_offset + cd_size, 1))
        f.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF,
                            0xFFFFFFFF, 0))

three = [(b"result.json", result()), (b"changes.patch", b"diff\n" * 1000),
         (b"worker.log", b"log\n")]
if "many" in which:
    write(f"{tmp}/many.zip", three + [(b"e%d" % i, b"") for i in range(extra)])
if "large" in which:
    log = (b"a line of the worker's log\n" * (log_mib * MIB // 27 + 1))[:log_mib * MIB]
    files = three[:2] + [(b"worker.log", log)]
    used = sum(len(d) for _, d in files)
    write(f"{tmp}/large.zip", files, stray=max(0, large_mib * MIB - used - 4096))
if "full" in which:
    out = "x" * (8 * MIB - len(result("")) - 16)
    files = [(b"result.json", result(out)), (b"changes.patch", b"p" * (128 * MIB)),
             (b"worker.log", b"l" * (32 * MIB))]
    assert len(files[0][1]) <= 8 * MIB
    write(f"{tmp}/full.zip", files)
PY
# GitHub's API and artifact storage, as far as a download goes.
cat >"$tmp/serve.py" <<'PY'
import http.server, os, shutil, sys

root, portfile = sys.argv[1], sys.argv[2]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        port = self.server.server_port
        if self.path.startswith("/repos/o/r/actions/artifacts/"):
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{port}/_storage/{self.server.archive}?sig=1")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        path = os.path.join(root, self.path.split("?")[0].removeprefix("/_storage/"))
        if self.headers.get("Authorization") or not os.path.isfile(path):
            self.send_response(403 if self.headers.get("Authorization") else 404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/zip")
        self.send_header("Content-Length", str(os.path.getsize(path)))
        self.end_headers()
        with open(path, "rb") as f:
            shutil.copyfileobj(f, self.wfile, 1 << 20)
    def do_POST(self):
        # Which archive the next download serves.
        self.server.archive = self.path.strip("/")
        self.send_response(204)
        self.end_headers()
    def log_message(self, *args):
        pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
s.archive = ""
with open(portfile + ".new", "w") as f:
    f.write(str(s.server_port))
os.rename(portfile + ".new", portfile)
s.serve_forever()
PY
python3 "$tmp/serve.py" "$tmp" "$tmp/port" &
server=$!
cargo build -q --profile "$PROFILE" --example artifact_zip_rss
dir=$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")
bin="${CARGO_TARGET_DIR:-target}/$dir/examples/artifact_zip_rss"
while [ ! -s "$tmp/port" ]; do sleep 0.1; done
api="http://127.0.0.1:$(cat "$tmp/port")"
for archive in ${ARCHIVES:-many large full}; do
  zip="$tmp/$archive.zip"
  echo "$archive: $(($(stat -c %s "$zip") / 1048576)) MiB"
  curl -fsS -X POST "$api/$archive.zip" >/dev/null
  "$bin" download "$api"
  "$bin" dagexec "$zip"
  if [ "${ZIP_CRATE:-0}" = 1 ]; then "$bin" zip-crate "$zip"; fi
done
