#!/usr/bin/env bash
# run_all.sh - kvbench's main job: reproduce the RocketKV paper's experiment
# families at this machine's scale, then write tables and plots.
#
#   ./run_all.sh                 default: needle, RULER, SCBench-like multi-turn, the
#                                pooling and split ablations and the speed table on the
#                                default model (about an hour on 2 cores)
#   ./run_all.sh --quick         a few minutes: configs/quick.json + a short speed table
#   ./run_all.sh --full --model PATH
#                                the paper's scale (configs/paper_*.json) on your model
#                                (e.g. Llama-3.1-8B-Instruct GGUF); needs a big machine
# Options: --out DIR (default results/run_all[_quick|_full]), --threads N. A sweep already
# in DIR is resumed (`kvbench sweep --resume`): a killed one is continued, a finished one
# left as it is, and one of another model, config, build or samples is refused: delete it
# or give another --out. --resume, for older scripts, is accepted: it is what run_all.sh
# always does.
# Set-up is automatic: missing Debian/PyPI packages (as root), the build, the default model.
set -euo pipefail
cd "$(dirname "$0")"

mode=default model="" out="" threads=()
while (($#)); do
  case $1 in
    --quick) mode=quick ;;
    --full) mode=full ;;
    --model) model=${2:?--model needs a path}; shift ;;
    --out) out=${2:?--out needs a directory}; shift ;;
    --resume) ;;
    --threads) threads=(--threads "${2:?--threads needs a number}"); shift ;;
    -h|--help) sed -n '2,/^# Set-up/p' "$0"; exit 0 ;;
    *) echo "run_all.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [[ $mode == full && -z $model ]]; then
  echo "run_all.sh: --full needs --model PATH (a llama-arch GGUF, e.g. Llama-3.1-8B-Instruct)" >&2
  exit 2
fi

say() { printf '\n== %s\n' "$*" >&2; }

say "set-up: packages, build, model"
bash scripts/deps.sh
make -j"$(nproc)" all >/dev/null
kv=build/kvbench
model_args=()
if [[ -n $model ]]; then
  model_args=(--model "$model")
else
  make --no-print-directory model
fi

case $mode in
  quick)   out=${out:-results/run_all_quick}
           configs=(configs/quick.json)
           bench=(--contexts 1024,4096 --budgets 256 --decode-tokens 8 --reps 2) ;;
  default) out=${out:-results/run_all}
           configs=(configs/machine/needle.json configs/machine/ruler.json
                    configs/machine/scbench.json configs/machine/ablations.json)
           bench=(--contexts 1024,2048,4096,8192 --budgets 256,1024 --decode-tokens 16 --reps 3 --rounds 3) ;;
  full)    out=${out:-results/run_all_full}
           configs=(configs/paper_needle.json configs/paper_ruler.json
                    configs/paper_longbench.json configs/paper_scbench.json)
           bench=(--contexts 16384,32768,65536 --budgets 256,512,1024,2048,4096 --decode-tokens 16 --reps 3 --rounds 3) ;;
esac
mkdir -p "$out"
start=$(date +%s)

for cfg in "${configs[@]}"; do
  name=$(basename "$cfg" .json)
  say "sweep $cfg -> $out/$name"
  # a run already there is resumed: the sweep continues a killed one, leaves a finished
  # one as it is, and refuses one of another model, config, build or samples (exit 2)
  resume=()
  [[ -f $out/$name/run.json ]] && resume=(--resume)
  rc=0
  $kv sweep "$cfg" --out "$out/$name" "${resume[@]}" "${model_args[@]}" "${threads[@]}" || rc=$?
  if ((rc)); then
    ((rc == 2)) && [[ ${#resume[@]} -gt 0 ]] &&
      echo "run_all.sh: $out/$name holds a run that this one cannot continue (see above): delete it, or give --out DIR" >&2
    exit "$rc"
  fi
  $kv plot "$out/$name" >&2 || echo "run_all.sh: some plots of $name failed" >&2
done

say "speed table: kvbench bench methods -> $out/speed"
$kv bench methods "${model_args[@]}" "${threads[@]}" "${bench[@]}" --out "$out/speed"
$kv plot "$out/speed" >&2 || true

say "done in $(( ($(date +%s) - start) / 60 )) min"
echo "Tables and plots:"
for d in "$out"/*/; do
  [[ -f $d/summary.csv || -f $d/latency.csv ]] || continue
  echo "  $d: $(cd "$d" && ls summary.csv latency.csv 2>/dev/null | tr '\n' ' ')+ $(ls "$d"/plots/*.png 2>/dev/null | wc -l) PNG plots in ${d}plots/"
done
