#!/usr/bin/env bash
# The two-GPU check of docs/gpu-nodes.md (issue 40): on a node with >= 2 GPUs set up only from the
# wheelhouse (`. benchmarks/gpu_setup.sh`), the joblib launcher spreads one sweep over devices=[0,1].
# Prints the sweep's wall time, then how many FINISHED runs each GPU (its device_uuid tag) ran.
#   . benchmarks/gpu_setup.sh && bash benchmarks/gpu_devices_session.sh OUT_DIR
. "$(dirname "${BASH_SOURCE[0]}")/gpu_session_common.sh"
nvidia-smi --query-gpu=index,name,uuid,driver_version --format=csv,noheader | tee "$OUT/gpus.txt"
run two_gpus 500 hydra/launcher=joblib hydra.launcher.n_jobs=2 'devices=[0,1]' \
    swizzle=identity,xcd,grouped kernel=igemm shape=tiny
python3 - "$W/mlflow.db" <<'EOF' | tee -a "$OUT/summary.txt"
import collections, sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("""SELECT r.status, t.value FROM runs r LEFT JOIN tags t
                     ON t.run_uuid = r.run_uuid AND t.key = 'device_uuid'
                     WHERE r.run_uuid IN (SELECT run_uuid FROM tags WHERE key = 'spec_hash')""").fetchall()
for (status, uuid), n in sorted(collections.Counter(rows).items(), key=str):
    print(f"{n:3d} job runs {status:9s} on {uuid}")
EOF
