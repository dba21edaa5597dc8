# Sourced by the gpu_*_session.sh scripts: a scratch dir with one MLflow store; `run`, which
# runs one multirun, prints its wall time and profiler launches, then its job lines; and
# `node_header FILE`, which appends the GPU, driver, torch, Triton, cuDNN and commit to FILE.
set -uo pipefail
OUT=${1:-${OUT:-/tmp/swizzlebench-out}}
mkdir -p "$OUT"
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
W=$(mktemp -d); cd "$W"
export PYTHONUNBUFFERED=1
DB="sqlite:///$W/mlflow.db"
run() {  # name, time limit in s, then harness args
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s.%N)
  timeout "$limit" python3 -m harness -m "$@" tracking.uri="$DB" hydra.sweep.dir="$W/$name" > "$OUT/$name.log" 2>&1
  local rc=$? t1=$(date +%s.%N)
  local launches=$(find "$W/$name" -name command.txt 2>/dev/null | wc -l)
  printf '%-22s rc=%d wall=%6.1f s profiler_launches=%d\n' "$name" $rc "$(python3 -c "print($t1 - $t0)")" \
    "$launches" | tee -a "$OUT/summary.txt"
  grep -E '^\[job' "$OUT/$name.log" | sed 's/^/    /' | cut -c1-230
}
node_header() {  # file: the node and the checkout a session's figures come from
  { nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cudnn', torch.backends.cudnn.version())"
    cat "$REPO/harness/BUILD_COMMIT" 2>/dev/null || echo "commit unknown (no harness/BUILD_COMMIT)"
  } | tee -a "$1"
}
