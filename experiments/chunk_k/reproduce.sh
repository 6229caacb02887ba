#!/usr/bin/env bash
# Reproduces this study: the nine-job sweep, the comparison of 128 x 5 against the
# baseline 128 x 3, the sweep table against that baseline, and the decision record.
# Usage: bash experiments/chunk_k/reproduce.sh [WORK_DIR]
# The run directories go to WORK_DIR (default: a fresh temporary folder; they are large and
# not committed). The comparison, sweep table and decision record are written here.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# the project is the repository: the records name paths inside it only, relative to them
cd "$here/../.."
work="${1:-$(mktemp -d)}"
sweep="$work/sweep"

raglab run -m experiment=chunk_k tracking=none progress=off \
  hydra.sweep.dir="$sweep" cache_dir="$work/cache"

# the job directory of one point of the sweep, read from each job's own config.yaml
job() {
  python - "$sweep" "$1" "$2" <<'EOF'
import pathlib, sys, yaml
sweep, size, k = pathlib.Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
for cfg in sorted(sweep.glob("*/config.yaml")):
    c = yaml.safe_load(cfg.read_text())
    if c["chunker"]["size"] == size and c["k"] == k:
        print(cfg.parent)
        break
else:
    sys.exit(f"no job with chunker.size={size} k={k} in {sweep}")
EOF
}
base="$(job 128 3)"
cand="$(job 128 5)"

rm -rf "$here/compare-128x3-vs-128x5" "$here/sweep-vs-128x3"
raglab compare "$base" "$cand" --out "$here/compare-128x3-vs-128x5"
raglab compare "$sweep" --baseline chunker.size=128,k=3 --out "$here/sweep-vs-128x3"
# decide exits 1 for NO-GO and 4 for INCONCLUSIVE: outcomes, not failures of this script
status=0
raglab decide "$base" "$cand" gates=default --study "$here" --name chunk128-k5 \
  --question "Should the reference pipeline move from k=3 to k=5 at chunk size 128?" \
  || status=$?
[ "$status" -le 1 ] || [ "$status" -eq 4 ] || exit "$status"
echo "decide exit code: $status (0 GO, 1 NO-GO, 4 INCONCLUSIVE)"
