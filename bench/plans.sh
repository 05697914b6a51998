# bench/plans.sh — sourced by the benchmark scripts: the cached genplan plans they share.
#
# ensure_plans: makes target/bench-plans/plan-N.json for every N in $SIZES (seed $SEED) with
# bench/genplan_fast.py, whose output is byte-identical to $GENPLAN's. The cache is tied to
# the generator sources: if either changes, every cached plan is regenerated; REGEN=1 forces
# it. Expects: root, GENPLAN, PLAN_DIR, SIZES, SEED, PYTHON, and the say/die functions.
# shellcheck shell=bash disable=SC2154  # the variables above are set by the sourcing script

ensure_plans() {
    [[ -f "$GENPLAN" ]] || die "genplan.py not found at $GENPLAN (set GENPLAN=...)"
    mkdir -p "$PLAN_DIR"
    local genkey n f start
    genkey="$(cat "$GENPLAN" "$root/bench/genplan_fast.py" | sha256sum | cut -c1-16)"
    if [[ "$(cat "$PLAN_DIR/.genkey" 2>/dev/null || true)" != "$genkey" ]]; then
        rm -f "$PLAN_DIR"/plan-*.json
        printf '%s\n' "$genkey" > "$PLAN_DIR/.genkey"
    fi
    for n in $SIZES; do
        f="$PLAN_DIR/plan-$n.json"
        if [[ ! -s "$f" || -n "${REGEN:-}" ]]; then
            say "== generating $n-task plan -> ${f#"$root"/}"
            start=$(date +%s.%N)
            "$PYTHON" "$root/bench/genplan_fast.py" --genplan "$GENPLAN" --tasks "$n" --seed "$SEED" > "$f.tmp" \
                || { rm -f "$f.tmp"; die "plan generation failed for $n tasks"; }
            mv "$f.tmp" "$f"
            say "   $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f s", b-a}')"
        fi
    done
}
