#!/usr/bin/env bash
# Installs what kvbench needs on a fresh Debian machine: Debian packages with
# apt-get (only when run as root and something is missing) and the Python
# packages the tests use as independent references (numpy, gguf, tokenizers,
# rouge, regex, pytest, pytest-xdist, rouge_score, nltk, jinja2). Idempotent: does nothing when
# all is present.
set -euo pipefail

# header-or-command  package
need=(
  "/usr/include/cjson/cJSON.h libcjson-dev"
  "/usr/include/csv.h libcsv-dev"
  # the library, not cblas.h: reference BLAS (libblas-dev) installs a cblas.h
  # too, without OpenBLAS's own functions, and then the link fails
  "/usr/lib/$(uname -m)-linux-gnu/libopenblas.so libopenblas-dev"
  "cmd:gnuplot gnuplot-nox"
  "cmd:gcc gcc"
  "cmd:make make"
  "cmd:python3 python3"
  "/usr/share/games/fortunes/fortunes fortunes-min"
  "/usr/share/wordnet/index.noun wordnet-base"
  "/usr/share/dict/american-english wamerican"
)
missing=()
for entry in "${need[@]}"; do
  what=${entry% *}; pkg=${entry##* }
  if [[ $what == cmd:* ]]; then
    command -v "${what#cmd:}" >/dev/null 2>&1 || missing+=("$pkg")
  else
    [[ -e $what ]] || missing+=("$pkg")
  fi
done
# Debian packages: installed as root, else named (exit 2)
apt_install() {
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
    echo "deps: installing Debian packages: $*" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  else
    echo "deps: missing Debian packages: $*" >&2
    echo "deps: install them with: sudo apt-get install $*" >&2
    exit 2
  fi
}
if ((${#missing[@]})); then apt_install "${missing[@]}"; fi

py_missing=()
python3 -c 'import numpy' 2>/dev/null || py_missing+=(numpy)
python3 -c 'import gguf' 2>/dev/null || py_missing+=(gguf)
python3 -c 'import tokenizers' 2>/dev/null || py_missing+=(tokenizers)
python3 -c 'import rouge' 2>/dev/null || py_missing+=("rouge==1.0.1")
python3 -c 'import regex' 2>/dev/null || py_missing+=(regex)
python3 -c 'import pytest' 2>/dev/null || py_missing+=(pytest)
python3 -c 'import xdist' 2>/dev/null || py_missing+=(pytest-xdist)  # tests/run.sh: one worker per core
python3 -c 'import rouge_score' 2>/dev/null || py_missing+=(rouge_score)  # metric reference (ROUGE-Lsum)
python3 -c 'import nltk' 2>/dev/null || py_missing+=(nltk)  # metric reference (BLEU)
python3 -c 'import jinja2' 2>/dev/null || py_missing+=(jinja2)  # chat template reference
if ((${#py_missing[@]})); then
  # pip only when something is to be installed (a machine with every package needs none)
  python3 -c 'import pip' 2>/dev/null || apt_install python3-pip
  echo "deps: installing Python test packages: ${py_missing[*]}" >&2
  pip_flags=(--quiet --disable-pip-version-check)
  # Debian's system Python refuses plain pip installs (PEP 668).
  perr=$(mktemp)
  trap 'rm -f "$perr"' EXIT
  if python3 -m pip install "${pip_flags[@]}" "${py_missing[@]}" 2>"$perr"; then :
  elif grep -q externally-managed "$perr"; then
    python3 -m pip install "${pip_flags[@]}" --break-system-packages "${py_missing[@]}"
  else
    cat "$perr" >&2
    echo "deps: pip could not install ${py_missing[*]} (is PyPI reachable?)" >&2
    exit 1
  fi
fi
exit 0
