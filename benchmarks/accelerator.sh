#!/usr/bin/env bash
# The one-shot accelerator check (docs/howto/sample_on_a_gpu.md): installs what it needs, then runs
# benchmarks/accelerator.py (the likelihood, a reduced PT1 sweep, async against lockstep NUTS, SGLD LLC on a
# 1e6-parameter MLP, SMC with 1e5 particles, each against this machine's CPU), within 8 minutes on a GPU.
#
#   benchmarks/accelerator.sh [--tiny] [--sections likelihood pt1 nuts sgld smc]
#
# Which Python: $PYTHON if set.  Else, on a machine with an NVIDIA GPU, the virtual environment .venv-accelerator,
# made once: it sees the system's packages (an image with JAX for CUDA keeps its JAX) and gets the project and
# what is missing from the package index, with jax[cuda12] when the system's JAX sees no GPU; on a machine with no
# network, from the wheels in .whl/ (pip download them where pip works).  With no GPU: README's .venv.
set -euo pipefail
cd "$(dirname "$0")/.."
sees_gpu() { "$1" -c "import jax, sys; sys.exit(jax.default_backend() != 'gpu')" >/dev/null 2>&1; }
if [[ -n "${PYTHON:-}" ]]; then
  py=$PYTHON
elif command -v nvidia-smi >/dev/null 2>&1; then
  venv=.venv-accelerator
  if [[ ! -f $venv/installed ]]; then           # made once; a failed install is redone on the next call
    python3 -m venv --system-site-packages "$venv"
    pip=("$venv/bin/pip" install -q)
    [[ -d .whl ]] && pip+=(--no-index --find-links .whl)
    "${pip[@]}" -e .                             # no constraints.txt: an image's newer JAX for CUDA stays
    sees_gpu "$venv/bin/python" || "${pip[@]}" "jax[cuda12]"
    touch "$venv/installed"
  fi
  py=$venv/bin/python
  sees_gpu "$py" || { echo "accelerator.sh: nvidia-smi sees a GPU but JAX in $venv does not (jax.default_backend() is not 'gpu')" >&2; exit 1; }
else
  py=.venv/bin/python
  [[ -x $py ]] || { python3 -m venv .venv && .venv/bin/pip install -q -e . -c constraints.txt; }
fi
# the CPU is the comparison: JAX must see it beside the accelerator
if [[ -n "${JAX_PLATFORMS:-}" && ",$JAX_PLATFORMS," != *",cpu,"* ]]; then export JAX_PLATFORMS="$JAX_PLATFORMS,cpu"; fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
exec env PYTHONUNBUFFERED=1 "$py" benchmarks/accelerator.py "$@"
