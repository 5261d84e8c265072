"""The package installed from a wheel (not the checkout) finds its shipped configs and runs the default
one: the configs travel as package data (pyproject.toml maps experiments/ to slt_relu/configs)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_lists_and_runs_the_shipped_configs(tmp_path):
    src = tmp_path / "src"                     # built from a copy: the build's own folders stay out of the checkout
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src)
    for name in ("slt_relu", "experiments"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp_path / "dist"), str(src)], check=True, capture_output=True, cwd=tmp_path)
    wheel, = (tmp_path / "dist").glob("slt_relu-*.whl")
    site = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(wheel)],
                   check=True, capture_output=True)
    # the wheel's copy, not the checkout's, is imported: its folder has no experiments/ beside it
    env = {**os.environ, "PYTHONPATH": str(site)}

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "slt_relu.workflow.cli", *args], capture_output=True, text=True,
                              cwd=tmp_path, env=env)

    where = subprocess.run([sys.executable, "-c", "import slt_relu; print(slt_relu.__file__)"], capture_output=True,
                           text=True, cwd=tmp_path, env=env).stdout.strip()
    assert Path(where).is_relative_to(site), where
    listed = cli("list")
    assert listed.returncode == 0, listed.stderr[-2000:]
    shipped = sorted(p.stem for p in (ROOT / "experiments").glob("*.toml"))
    assert all(name in listed.stdout for name in shipped)
    run = cli("run", "dslt3_degenerate_node", "--out", str(tmp_path / "out"), "--no-progress")
    assert run.returncode == 0, run.stderr[-2000:]
    assert (tmp_path / "out" / "metrics.json").is_file() and (tmp_path / "out" / "landscape.png").is_file()
    assert not (tmp_path / "runs").exists()
