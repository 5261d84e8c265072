#!/bin/bash
# An example SLURM batch script: DSLT4 PT1 by tempered SMC (dslt4_pt1_smc) over 4 tasks on 2 nodes, one GPU
# each.  Every task runs the same command; slt-relu joins them through jax.distributed.initialize(), which
# reads SLURM's environment, shares the sweep's programs among them (program k on task k mod 4) and lets
# task 0 write the results folder.  The results folder's parent (here $SLURM_SUBMIT_DIR/runs) must be on a
# file system all nodes see: the tasks exchange their points through its checkpoint folder.  A task that dies
# stops the others within --heartbeat-timeout seconds; rerun the same command to resume.
#
#   sbatch experiments/slurm_dslt4_pt1_smc.sh
#
#SBATCH --job-name=slt-relu-pt1-smc
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=2
#SBATCH --gpus-per-task=1
#SBATCH --cpus-per-task=8
#SBATCH --time=01:00:00
#SBATCH --output=slurm-%j.out

set -euo pipefail
cd "$SLURM_SUBMIT_DIR"
# the environment of README's first command, with JAX for CUDA on the nodes:
#   .venv/bin/pip install -e ".[dev]" "jax[cuda12]"
srun --kill-on-bad-exit=1 .venv/bin/slt-relu run dslt4_pt1_smc --out runs/dslt4_pt1_smc --no-progress \
    --heartbeat-timeout 120
