#!/usr/bin/env bash
# Prints the absolute path of the directory cargo builds this repository into, as cargo
# resolves it: CARGO_TARGET_DIR (a relative one from the current directory, as cargo reads
# it), build.target-dir of a .cargo/config.toml, or <repository>/target. The CI scripts find
# what cargo built through it, never through a literal `target/`.
#   bin="$(bash .ci/target-dir.sh)/debug/dagexec"
set -euo pipefail
manifest="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/Cargo.toml"
cargo metadata --format-version 1 --no-deps --offline --manifest-path "$manifest" \
  | python3 -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])'
