#!/usr/bin/env bash
# check_genplan_fast.sh — proves bench/genplan_fast.py is a byte-identical drop-in
# for the (slow, quadratic) bench/genplan.py.
#
# It runs both generators with the same arguments at 500 and 2000 tasks, for two
# seeds, schema 2 (pretty and --compact) and schema 3, plus one non-default shape,
# and compares the outputs with cmp. Exits non-zero on the first difference.
# Takes ~10 s (genplan.py at 2000 tasks is the slow part).
#
# Run from anywhere:   bench/check_genplan_fast.sh
# Other genplan.py:    GENPLAN=/path/to/genplan.py bench/check_genplan_fast.sh
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
genplan="${GENPLAN:-$here/genplan.py}"
fast="$here/genplan_fast.py"
py="${PYTHON:-python3}"

if [[ ! -f "$genplan" ]]; then
    echo "check_genplan_fast: genplan.py not found at $genplan (set GENPLAN=...)" >&2
    exit 2
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

fail=0
ncase=0
check() {  # check ARGS... : compare both generators on the same arguments
    ncase=$((ncase + 1))
    "$py" "$genplan" "$@" > "$tmp/orig.json"
    "$py" "$fast" --genplan "$genplan" "$@" > "$tmp/fast.json"
    if cmp -s "$tmp/orig.json" "$tmp/fast.json"; then
        echo "ok    $*  ($(wc -c < "$tmp/orig.json") bytes)"
    else
        echo "DIFF  $*" >&2
        cmp "$tmp/orig.json" "$tmp/fast.json" >&2 || true
        fail=$((fail + 1))
    fi
}

for n in 500 2000; do
    for seed in 1 42; do
        check --tasks "$n" --seed "$seed"
    done
done
check --tasks 500 --seed 1 --compact
check --tasks 500 --seed 3 --schema 3
check --tasks 2000 --seed 1 --schema 3
check --tasks 500 --seed 9 --edge-p 0.4 --files 60 --files-per-task 4 --window 5

if (( fail > 0 )); then
    echo "check_genplan_fast: $fail of $ncase cases differ" >&2
    exit 1
fi
echo "check_genplan_fast: all $ncase cases byte-identical"
