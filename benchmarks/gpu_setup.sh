# Source me on a lent GPU node: installs the carried wheels (.gpuwhl, built with
# `python -m harness.tools.wheelhouse build --python-version 3.12 --platform manylinux_2_28_x86_64
# --dest .gpuwhl`) and this
# checkout into /tmp/site, and exports PYTHONPATH.  Idempotent.  The copy has no .git: carry
# harness/BUILD_COMMIT (`git rev-parse HEAD > harness/BUILD_COMMIT` here) so runs name their commit.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpuwhl/*.whl || return 1
rm -rf /tmp/site/harness /tmp/site/kernels /tmp/site/swizzles /tmp/site/swizzlebench_conf
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site . || return 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
command -v ncu >/dev/null || export PATH="$PATH:/usr/local/cuda/bin"
