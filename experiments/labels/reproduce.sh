#!/usr/bin/env bash
# Reproduces this study from a clean folder: the two runs (tracked to an MLflow store in
# this folder), the seed-7 sample of 60 cases, the committed labels read back, the
# comparison with its Human scale table, the decision record, and a check that MLflow holds
# the prediction-powered figures of both runs. Prints the figures the README quotes.
# Usage: bash experiments/labels/reproduce.sh        (about 1 min on 2 idle cores)
# The runs, the MLflow store and the comparison's large files are regenerated here and not
# committed (.gitignore); each call adds one decision record (decisions.md lists them).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# the project is the repository: the records name paths inside it only, relative to them
cd "$here/../.."
rel=experiments/labels
uri="sqlite:///$rel/mlflow.db"

# a clean folder: only what this script regenerates is removed
rm -rf "$rel/runs" "$rel/cache" "$rel/mlartifacts" "$rel/compare-k5-vs-k3" \
  "$rel/mlflow.db" "$rel/mlflow.db.lock"

# 1. two runs of the demo: reference system, fixed 64-token chunks, offline grader; k=5
#    (the default) and k=3
for k in 5 3; do
  raglab run chunker=fixed chunker.size=64 k=$k grader=heuristic progress=off \
    hydra.run.dir="$rel/runs/k$k" cache_dir="$rel/cache" \
    tracking.uri="$uri" tracking.experiment=labels
done

# 2. the same 60 cases in both runs; the labelling files land in runs/k*/labels/
raglab label "$rel/runs/k5" "$rel/runs/k3" --n 60 --metrics faithfulness --seed 7

# 3. the labels one reader made of those files (record_labels.py), read back
raglab label "$rel/runs/k5" --from "$rel/labels-k5.jsonl"
raglab label "$rel/runs/k3" --from "$rel/labels-k3.jsonl"

# the runs by their MLflow ids, so the comparison and the decision are logged there too
run_id() { python -c "import json,sys; print(json.load(open(sys.argv[1]))['mlflow']['run_id'])" "$1/run.json"; }
base="$(run_id "$rel/runs/k5")"
cand="$(run_id "$rel/runs/k3")"

# 4. the comparison (its Human scale table is in compare.md) and the decision
raglab compare "$base" "$cand" --uri "$uri" --out "$rel/compare-k5-vs-k3"
status=0
raglab decide "$base" "$cand" --uri "$uri" gates="$rel/gates-faithfulness.yaml" \
  --study "$rel" --name k5-to-k3 \
  --question "Can the reference pipeline (64-token chunks) cut its context from five passages to three without losing faithfulness, on the human scale?" \
  || status=$?
[ "$status" -le 1 ] || [ "$status" -eq 4 ] || exit "$status"
echo "decide exit code: $status (0 GO, 1 NO-GO, 4 INCONCLUSIVE)"

# 5. what MLflow holds, and the figures of the README
python - "$rel" "$uri" "$base" "$cand" <<'PY'
import json, sys
from pathlib import Path
from mlflow.tracking import MlflowClient

rel, uri, ids = Path(sys.argv[1]), sys.argv[2], {"k5": sys.argv[3], "k3": sys.argv[4]}
client = MlflowClient(uri)
scale = {"yes": 1.0, "partial": 0.5, "no": 0.0}
for run, run_id in ids.items():
    r = client.get_run(run_id)
    ppi = {k: round(v, 4) for k, v in sorted(r.data.metrics.items())
           if k.startswith("ppi.faithfulness.")}
    if not ppi:
        sys.exit(f"MLflow run {run_id} ({run}) holds no ppi.faithfulness.* metrics")
    print(f"MLflow {run} ({run_id}): {ppi}; decision tag {r.data.tags.get('raglab.decision')}")
    records = {}
    for line in (rel / "runs" / run / "records.jsonl").read_text().splitlines():
        rec = json.loads(line)
        records[rec["case_id"]] = rec
    labels = [json.loads(x) for x in (rel / f"labels-{run}.jsonl").read_text().splitlines()]
    judge = [records[x["case_id"]]["metrics"]["faithfulness"] for x in labels]
    human = [scale[x["label"]] for x in labels]
    jm, hm = sum(judge) / len(judge), sum(human) / len(human)
    print(f"  labelled cases {len(labels)}: judge mean {jm:.4f}, human mean {hm:.4f}, "
          f"judge - human {jm - hm:+.4f}; disagreements "
          f"{[(x['case_id'], j, h) for x, j, h in zip(labels, judge, human) if j != h]}")
ppi = json.loads((rel / "compare-k5-vs-k3" / "compare.json").read_text())["ppi"]
o = ppi["metrics"]["faithfulness"]["overall"]
for part in ("baseline", "candidate", "delta"):
    e = o[part]
    print(f"human scale {part}: {e['estimate']:+.4f} [{e['ci_low']:+.4f}, {e['ci_high']:+.4f}]"
          f" (judge {e['judge_mean']:+.4f} over {e['n_all']}; lambda {e['lam']:.2f}; "
          f"{e['n_labelled']} labelled, worth {e['n_effective']:.1f})")
PY
