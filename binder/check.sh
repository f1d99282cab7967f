#!/usr/bin/env bash
# Prove that binder/ alone sets up an environment in which every teaching notebook runs.
#
# Does what repo2docker does, without Docker: copy the repository, make a fresh virtual
# environment holding only what repo2docker's base image gives a kernel (ipykernel and the Jupyter
# tools), install binder/requirements.txt, run binder/postBuild from the repository root, then
# execute every notebook in notebooks/ headless. Nothing from the developer's .venv is used.
# Prints the wall time of each step. Usage: binder/check.sh  (PYTHON=python3.11 to choose Python)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-}"
if [ -z "$python" ]; then
  wanted="$(sed -n 's/^python-\([0-9.]*\).*/python\1/p' "$root/binder/runtime.txt" 2>/dev/null || true)"
  if [ -n "$wanted" ] && command -v "$wanted" >/dev/null 2>&1; then python="$wanted"; else python=python3; fi
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/nbagent-binder.XXXXXX")"
trap 'rm -rf "$work"' EXIT
unset PYTHONPATH PYTHONHOME VIRTUAL_ENV
total_start=$(date +%s.%N)
step() {  # step NAME COMMAND...: run it, say how long it took
  local name="$1"; shift
  local start; start=$(date +%s.%N)
  echo "== $name"
  "$@"
  printf '== %s: %.1f s\n' "$name" "$(python3 -c "import sys,time; print(time.time() - float(sys.argv[1]))" "$start")"
}

copy_repository() {  # the files a clone would have (tracked, plus new files not ignored)
  mkdir -p "$work/repo"
  (cd "$root" && git ls-files -z --cached --others --exclude-standard) |
    (cd "$root" && xargs -0 cp --parents -t "$work/repo" 2>/dev/null || true)
  test -f "$work/repo/binder/postBuild"
}
make_environment() {
  "$python" -m venv "$work/env"
  "$work/env/bin/python" --version
}
install_base() {  # repo2docker's image already has these; they are not in binder/
  "$work/env/bin/pip" install --quiet --disable-pip-version-check ipykernel nbclient
}
install_requirements() {
  (cd "$work/repo" && "$work/env/bin/pip" install --quiet --disable-pip-version-check -r binder/requirements.txt)
}
run_post_build() {
  (cd "$work/repo" && PATH="$work/env/bin:$PATH" ./binder/postBuild > "$work/postBuild.log" 2>&1) ||
    { cat "$work/postBuild.log"; return 1; }
  (cd "$work" && "$work/env/bin/python" -c \
    "import nbagent; print('nbagent', nbagent.__version__, 'installed at', nbagent.__file__)")
}
execute_notebooks() {  # headless, offline: no model configured, no approvals to wait for
  local notebooks=("$work"/repo/notebooks/[0-9][0-9]_*.ipynb)
  [ -e "${notebooks[0]}" ] || { echo "no notebooks found"; return 1; }
  (cd "$work/repo/notebooks" &&
    env $(env | sed -n 's/^\(NBAGENT_[A-Z_]*\)=.*/-u \1/p') MPLBACKEND=Agg \
      "$work/env/bin/jupyter" execute --inplace --timeout=120 --kernel_name=python3 "${notebooks[@]}" \
      2>&1 | grep -v "Kernel is running over TCP" )
  "$work/env/bin/python" - "${notebooks[@]}" <<'PY'
import sys, nbformat
for path in sys.argv[1:]:
    nb = nbformat.read(path, as_version=4)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    errors = [o for o in outputs if o.get("output_type") == "error"]
    print(f"{path.rsplit('/', 1)[-1]:36} {len(outputs):3} outputs, {len(errors)} errors")
    if not outputs or errors:
        sys.exit(f"{path} did not run cleanly")
    if path.endswith("10_a_real_tiny_model.ipynb") and "Loaded SmolLM2" not in str(outputs):
        sys.exit(f"{path}: the local model did not run live (postBuild installs it)")
PY
}

step "copy the repository" copy_repository
step "fresh virtual environment ($python)" make_environment
step "base image packages (ipykernel, nbclient)" install_base
step "pip install -r binder/requirements.txt" install_requirements
step "binder/postBuild" run_post_build
step "execute the notebooks" execute_notebooks
printf '== binder check passed in %.1f s\n' "$(python3 -c "import sys,time; print(time.time() - float(sys.argv[1]))" "$total_start")"
