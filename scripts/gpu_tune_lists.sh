#!/usr/bin/env bash
# One device call that tunes lists of convolution problems, each with its own schedule breadth and time budget
# (run on the GPU machine from the repo root):
#   here:   python scripts/pte_problems.py <.pte files> --out <carry dir>/<name>.json     (one list per file)
#   device: LISTS="audio:150:40 dw:150:40 rest:200:8" DIR=<carry dir> bash scripts/gpu_tune_lists.sh
#           (each entry: <name>:<budget s>:<max schedules per template>; results in $OUT/tune.tgz:
#           tune/<name>.json, .log.jsonl, .md, .log)
#   here:   python scripts/merge_tables.py ... to merge each partial table into the shipped one
# The tuner runs on the export's Triton when scripts/device_triton.py installed it on this machine, so the table
# holds the schedules that are fastest in the code the export ships.
set -u
export PYTHONUNBUFFERED=1
out=$OUT/tune
mkdir -p "$out"
path=backends
[ -f build/device-triton/triton/__init__.py ] && path=build/device-triton:backends
PYTHONPATH=$path python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
for entry in ${LISTS:?LISTS=\"name:budget_s:max_schedules ...\"}; do
  IFS=: read -r name budget breadth <<< "$entry"
  timeout "$(( budget + 40 ))" env PYTHONPATH="$path" python3 scripts/tune.py --out "$out/$name.json" \
    --problems "json:${DIR:?DIR=<carried folder of lists>}/$name.json" --max-schedules "$breadth" \
    --budget-s "$budget" --jobs "${JOBS:-15}" > "$out/$name.log" 2>&1
  echo "$name: exit $?"
  tail -n 4 "$out/$name.log"
  # one archive: the device tool returns only a few files a call
  tar czf "$OUT/tune.tgz" -C "$OUT" tune
done
