#!/bin/bash
# usage: bash docs/scripts/bench_eagle.sh [HEAD.safetensors]   (writes out/eagle/bench-eagle-*.json / .txt)
# The EAGLE head bench of docs/eagle.md: HumanEval 10 (with the draft model), summarise 4, chat 6; run with nothing else on the machine
cd "$(dirname "$0")/../.."
H=${1:-assets/eagle/qwen2.5-coder-1.5b.safetensors}
mkdir -p out/eagle
python -m specdec_core bench --no-progress --suite humaneval --limit 10 --methods draft,eagle,eagle-tree --eagle-head $H \
  --max-new-tokens 128 --num-draft-tokens auto --json out/eagle/bench-eagle-humaneval.json > out/eagle/bench-eagle-humaneval.txt 2>&1
python -m specdec_core bench --no-progress --suite summarise --limit 4 --methods eagle,eagle-tree --eagle-head $H \
  --max-new-tokens 128 --num-draft-tokens auto --json out/eagle/bench-eagle-summarise.json > out/eagle/bench-eagle-summarise.txt 2>&1
python -m specdec_core bench --no-progress --suite chat --limit 6 --methods eagle,eagle-tree --eagle-head $H \
  --max-new-tokens 128 --num-draft-tokens auto --json out/eagle/bench-eagle-chat.json > out/eagle/bench-eagle-chat.txt 2>&1
echo done > out/eagle/bench-eagle.done
