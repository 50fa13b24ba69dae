#!/usr/bin/env bash
# Create latency of this checkout against an earlier commit of it, on the same machine in the
# same hour: ROUNDS rounds (default 2), each the earlier commit's own bench then this one's
# (`--designs ours --scenarios latency --no-real`), then a table of both sides
# (`python -m bench.against`). This VM's speed varies by a quarter within minutes, so figures
# measured on another day compare with nothing; these compare with each other.
#   bench/against.sh f795284 [ROUNDS]
# The earlier commit is checked out as a detached worktree under the cache directory (its own
# venv, from its own requirements, by its hack/venv.sh) and kept for the next comparison.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
ref=${1:?usage: bench/against.sh REF [ROUNDS]}
rounds=${2:-2}
sha=$(git -C "$here" rev-parse --verify "$ref^{commit}")
cache=${XDG_CACHE_HOME:-$HOME/.cache}/mysql-operator/bench-ref
tree=$cache/${sha:0:12}
mkdir -p "$cache"
if [ ! -e "$tree/bench/run.sh" ] || [ "$(git -C "$tree" rev-parse HEAD 2>/dev/null)" != "$sha" ]; then
  rm -rf "$tree"  # a killed earlier attempt, or a stale tree
  git -C "$here" worktree prune
  git -C "$here" worktree add --detach --force "$tree" "$sha" >/dev/null
fi
out=$here/bench/out/against
rm -rf "$out"
mkdir -p "$out"
for round in $(seq 1 "$rounds"); do
  for side in ref ours; do
    dir=$here
    [ "$side" = ref ] && dir=$tree
    echo ">> round $round/$rounds: $side ($(git -C "$dir" rev-parse --short HEAD)), $(date -u +%T)," \
      "load $(cut -d' ' -f1-3 /proc/loadavg)"
    "$dir/bench/run.sh" --designs ours --scenarios latency --no-real >"$out/$side-$round.log" 2>&1 \
      || { echo "   failed: $out/$side-$round.log"; continue; }
    cp "$dir/bench/out/results.json" "$out/$side-$round.json"
  done
done
cd "$here"
venv=$("$here/hack/venv.sh")
"$venv/bin/python" -m bench.against "$out" --ref "$(git rev-parse --short "$sha")" \
  --ours "$(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo +changes)" | tee "$out/results.md"
