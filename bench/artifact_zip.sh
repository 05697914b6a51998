#!/usr/bin/env bash
# bench/artifact_zip.sh — peak memory of the conductor's artifact zip reader (issue 20 §4).
#
# What it measures
#   A zip of a work job's three entries (result.json, changes.patch, worker.log) followed by
#   ENTRIES empty stored entries (default 1,000,000: ~95 MiB, zip64), written by the python
#   below. examples/artifact_zip_rss.rs loads it into memory as the conductor's download does
#   and reads it twice, each in its own process:
#     dagexec    actions::conduct::read_zip (the end record read first: refused, > 16 entries)
#     zip-crate  zip::ZipArchive::new on the whole archive (how the conductor read it before)
#   and prints the peak RSS (VmHWM) with the archive loaded and after the read.
#   ENTRIES=2900000 makes an archive of about the 256 MiB download limit.
#   MODES="dagexec" skips the zip crate's read (2 GB at the 256 MiB size).
#   It REPORTS, it does not gate. PROFILE=release builds optimised (the figures for memory
#   differ little from the default debug build, which the tests' target dir already holds).
set -euo pipefail
cd "$(dirname "$0")/.."
ENTRIES=${ENTRIES:-1000000}
PROFILE=${PROFILE:-dev}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
zip="$tmp/artifact.zip"
python3 - "$zip" "$ENTRIES" <<'PY'
import json, struct, sys, zlib

path, extra = sys.argv[1], int(sys.argv[2])
result = json.dumps({
    "version": 1, "task": 0, "attempt": 1, "round": 1, "base": "0" * 40,
    "output": "COMPLETED: ok\n", "exit": {"kind": "success"}, "durationMs": 1,
    "present": [], "changed": [], "acceptance": None,
}).encode()
files = [(b"result.json", result), (b"changes.patch", b""), (b"worker.log", b"log\n")]
files += [(b"e%d" % i, b"") for i in range(extra)]
local, central = bytearray(), bytearray()
for name, data in files:
    crc = zlib.crc32(data)
    offset = len(local)
    local += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0x800, 0, 0, 0x21, crc,
                         len(data), len(data), len(name), 0) + name + data
    central += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x314, 20, 0x800, 0, 0, 0x21,
                           crc, len(data), len(data), len(name), 0, 0, 0, 0,
                           0o100644 << 16, offset) + name
count, cd_offset, cd_size = len(files), len(local), len(central)
eocd64_at = cd_offset + cd_size
eocd64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count, count, cd_size, cd_offset)
locator = struct.pack("<IIQI", 0x07064B50, 0, eocd64_at, 1)
eocd = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
with open(path, "wb") as f:
    f.write(local); f.write(central); f.write(eocd64); f.write(locator); f.write(eocd)
PY
echo "artifact: $ENTRIES empty entries besides the three, $(($(stat -c %s "$zip") / 1048576)) MiB"
cargo build -q --profile "$PROFILE" --example artifact_zip_rss
dir=$([ "$PROFILE" = dev ] && echo debug || echo "$PROFILE")
bin="${CARGO_TARGET_DIR:-target}/$dir/examples/artifact_zip_rss"
for mode in ${MODES:-dagexec zip-crate}; do
  "$bin" "$zip" "$mode"
done
