#!/bin/bash
# usage: bash docs/scripts/bench_eagle.sh [HEAD.safetensors] [TAG]   (writes out/eagle/bench-eagle-TAG-*.json / .txt)
# The EAGLE bench of docs/eagle.md and issue 13: HumanEval 20 (with the draft model), summarise 5, chat one prompt of
# each category; greedy, 128 tokens, the app's default target and cost-aware draft length. Run with nothing else on
# the machine; for the AVX2 setting: ../shared/tools/avx2 bash docs/scripts/bench_eagle.sh HEAD avx2
cd "$(dirname "$0")/../.."
H=${1:-assets/eagle/qwen2.5-coder-1.5b.safetensors}
T=${2:-native}
mkdir -p out/eagle
run() {  # suite-name, then bench arguments
  local name=$1; shift
  python -m specdec_core bench --no-progress --eagle-head "$H" --max-new-tokens 128 --num-draft-tokens auto "$@" \
    --json out/eagle/bench-eagle-$T-$name.json > out/eagle/bench-eagle-$T-$name.txt 2>&1
}
run humaneval --suite humaneval --limit 20 --methods draft,eagle,eagle-tree
run chat --suite chat --per-category 1 --methods eagle,eagle-tree
run summarise --suite summarise --limit 5 --methods eagle,eagle-tree
echo done > out/eagle/bench-eagle-$T.done
