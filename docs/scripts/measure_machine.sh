#!/usr/bin/env bash
# The hardware issue's measurements on this machine, natively and under the AVX2 setting, one after another (run it
# on an otherwise idle machine). Writes logs and JSON to ${OUT:-out/machine}/. Usage from the repo root:
#   bash docs/scripts/measure_machine.sh [step ...]     steps: profile invariance repr race bench eagle (default: all)
set -u
OUT=${OUT:-out/machine}; mkdir -p "$OUT"
AVX2=../shared/tools/avx2
steps=${*:-profile invariance repr race bench eagle}
py="python -m specdec_core"
stamp() { echo "== $(date -u +%H:%M:%S) $*"; }
for s in $steps; do case $s in
profile)
  stamp profile native; $py profile --refresh --no-progress --json $OUT/profile-native.json > $OUT/profile-native.txt 2>&1
  stamp profile avx2;  $AVX2 $py profile --refresh --no-progress --json $OUT/profile-avx2.json > $OUT/profile-avx2.txt 2>&1 ;;
invariance)
  for r in bf16 int8; do stamp invariance $r
    PYTHONPATH=. python docs/scripts/invariance_cost.py $r > $OUT/invariance-$r-native.txt 2>&1; done ;;
repr)
  stamp repr native; PYTHONPATH=. python docs/scripts/repr_speed.py > $OUT/repr-native.txt 2>&1
  stamp repr avx2;   PYTHONPATH=. $AVX2 python docs/scripts/repr_speed.py > $OUT/repr-avx2.txt 2>&1 ;;
race)
  stamp race native; RUNS=2 python ../shared/tools/race_api.py > $OUT/race-native.txt 2>&1
  stamp race avx2;   RUNS=2 $AVX2 python ../shared/tools/race_api.py > $OUT/race-avx2.txt 2>&1 ;;
bench)
  stamp bench he10; $py bench --no-progress --suite humaneval --limit 10 --methods draft,lookup,medusa \
    --num-draft-tokens auto --json $OUT/bench-he10-auto-native.json --plot $OUT/bench-he10-auto-native.html \
    > $OUT/bench-he10-auto-native.txt 2>&1 ;;
eagle)
  stamp eagle; $py bench --no-progress --suite humaneval --limit 4 --methods draft,eagle,eagle-tree \
    --max-new-tokens 128 --num-draft-tokens auto --json $OUT/bench-eagle-native.json > $OUT/bench-eagle-native.txt 2>&1 ;;
esac; done
stamp done
