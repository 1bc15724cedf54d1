#!/usr/bin/env bash
# run_all.sh - kvbench's main job: reproduce the RocketKV paper's experiment
# families at this machine's scale, then write tables and plots.
#
#   ./run_all.sh                 default: needle, RULER, SCBench-like multi-turn, the
#                                pooling and split ablations and the speed table on the
#                                default model (30-40 minutes on 2 cores)
#   ./run_all.sh --quick         a few minutes: configs/quick.json + a short speed table
#   ./run_all.sh --full --model PATH
#                                the paper's scale (configs/paper_*.json) on your model
#                                (e.g. Llama-3.1-8B-Instruct GGUF); needs a big machine and
#                                the RULER, LongBench and SCBench files under data/
#                                (docs/DATASETS.md)
# Options: --out DIR (default results/run_all[_quick|_full] in the checkout; a relative DIR
# is taken from the directory run_all.sh is started in, as are --model PATH and
# $KVBENCH_MODEL), --threads N; each at most once. One run_all.sh at a time per DIR.
# Every config is checked first (`kvbench sweep --dry-run`: model, data, options), so a
# missing file stops the run before any sweep. A sweep already in DIR is resumed
# (`kvbench sweep --resume`): a killed one is continued, a finished one left as it is, and
# one of another model, config, build or samples is refused: delete it or give another
# --out. --resume, for older scripts, is accepted: it is what run_all.sh always does. The
# speed table is measured into DIR/speed.new and replaces DIR/speed only when whole.
# Set-up is automatic: missing Debian/PyPI packages (as root), the build, the default model
# (not fetched when --model or $KVBENCH_MODEL names another).
set -euo pipefail

fail() { echo "run_all.sh: $*" >&2; exit 2; }
# a path given relative to where run_all.sh was started
abspath() { if [[ $1 == /* ]]; then printf '%s' "$1"; else printf '%s/%s' "$PWD" "$1"; fi; }

mode=default model="" out="" threads=() seen=" "
while (($#)); do
  case $1 in
    --quick) mode=quick ;;
    --full) mode=full ;;
    --model|--out|--threads)
      (($# >= 2)) && [[ -n $2 ]] || fail "$1 needs a value (see --help)"
      [[ $seen == *" $1 "* ]] && fail "$1 given twice (the last would silently replace the first): give it once"
      seen+="$1 "
      case $1 in
        --model) model=$2
                 [[ $model == synthetic:* ]] && fail "--model $model: a sweep needs a GGUF file with a tokenizer"
                 model=$(abspath "$model") ;;
        --out) out=$(abspath "$2") ;;
        --threads) [[ $2 =~ ^[1-9][0-9]{0,3}$ ]] && (($2 <= 1024)) ||
                     fail "--threads expects an integer in [1, 1024], got '$2'"
                   threads=(--threads "$2") ;;
      esac
      shift ;;
    --resume) ;;
    -h|--help) sed -n '2,/^# (not fetched/p' "$0"; exit 0 ;;
    *) fail "unknown option '$1' (see --help)" ;;
  esac
  shift
done
if [[ $mode == full && -z $model ]]; then
  fail "--full needs --model PATH (a llama-arch GGUF, e.g. Llama-3.1-8B-Instruct)"
fi
[[ -n $out && -e $out && ! -d $out ]] && fail "--out $out is not a directory"
# $KVBENCH_MODEL (the model without --model) from the starting directory too
if [[ -n ${KVBENCH_MODEL:-} && $KVBENCH_MODEL != synthetic:* ]]; then
  export KVBENCH_MODEL=$(abspath "$KVBENCH_MODEL")
fi
cd "$(dirname "$(readlink -f "$0")")"

say() { printf '\n== %s\n' "$*" >&2; }

say "set-up: packages, build, model"
bash scripts/deps.sh
make -j"$(nproc)" BUILD=build all >/dev/null
kv=build/kvbench
model_args=()
if [[ -n $model ]]; then
  model_args=(--model "$model")
elif [[ -z ${KVBENCH_MODEL:-} ]]; then
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
say "model: ${model:-${KVBENCH_MODEL:-models/SmolLM2-135M-Instruct.Q4_1.gguf (the default)}}"
# every config before the first sweep: a missing data file or a bad option stops the run
# now, not after hours of the configs before it
bad=()
for cfg in "${configs[@]}"; do
  $kv sweep "$cfg" --out "$out/$(basename "$cfg" .json)" --dry-run "${model_args[@]}" "${threads[@]}" >/dev/null ||
    bad+=("$cfg")
done
((${#bad[@]} == 0)) || fail "${bad[*]} cannot run (above); nothing was run"
mkdir -p "$out"
# one run_all.sh per output directory: a second would remove the first one's speed.new
exec 9<"$out"
flock -n 9 || fail "another run_all.sh is writing $out: wait for it, or give another --out"
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
# measured into speed.new (what an earlier, unfinished measurement left there is removed) and
# moved into place once whole: an interrupted or failed measurement leaves the speed table of
# an earlier run as it was
rm -rf "$out/speed.new" "$out/speed.old"
$kv bench methods "${model_args[@]}" "${threads[@]}" "${bench[@]}" --out "$out/speed.new"
if [[ -e $out/speed ]]; then mv "$out/speed" "$out/speed.old"; fi
mv "$out/speed.new" "$out/speed"
rm -rf "$out/speed.old"
$kv plot "$out/speed" >&2 || true

say "done in $(( ($(date +%s) - start) / 60 )) min"
echo "Tables and plots:"
for d in "$out"/*/; do
  [[ -f $d/summary.csv || -f $d/latency.csv ]] || continue
  echo "  $d: $(cd "$d" && ls summary.csv latency.csv 2>/dev/null | tr '\n' ' ')+ $(ls "$d"/plots/*.png 2>/dev/null | wc -l) PNG plots in ${d}plots/"
done
