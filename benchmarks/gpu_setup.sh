# Source me on a lent GPU node: installs the carried wheels (.gpuwhl, built with
# `python -m harness.tools.wheelhouse build --python-version 3.12 --platform manylinux_2_28_x86_64
# --dest .gpuwhl`: the dependencies the image lacks and the cluster extra's launchers) and this
# checkout into /tmp/site, and exports PYTHONPATH.  Idempotent.  The copy has no .git: carry
# harness/BUILD_COMMIT (`git rev-parse HEAD > harness/BUILD_COMMIT` here) so runs name their commit.
# The checkout goes into a folder of its own and is merged in, so every hydra_plugins package
# stays (pip --target --upgrade would replace hydra_plugins/ with the checkout's one plugin).
# SWIZZLEBENCH_SITE, SWIZZLEBENCH_WHEELS: other folders than /tmp/site and .gpuwhl.
_site=${SWIZZLEBENCH_SITE:-/tmp/site}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$_site" "${SWIZZLEBENCH_WHEELS:-.gpuwhl}"/*.whl || return 1
rm -rf "$_site.own" && python3 -m pip install -q --no-index --no-deps --no-build-isolation --target "$_site.own" . || return 1
rm -rf "$_site"/harness "$_site"/kernels "$_site"/swizzles "$_site"/swizzlebench_conf "$_site"/hydra_plugins/swizzlebench_search "$_site"/swizzlebench-*.dist-info
cp -a "$_site.own"/. "$_site"/ && rm -rf "$_site.own"
export PYTHONPATH=$_site PYTHONUNBUFFERED=1
command -v ncu >/dev/null || export PATH="$PATH:/usr/local/cuda/bin"
