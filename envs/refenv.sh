#!/bin/sh
# Build the reference environment: the published Terminus-2 implementations (Harbor and
# terminal-bench) in their own venv, on a Python >= 3.12 found on this machine. The conformance
# suite (tests/conformance) compares our agent loop against them; `eval.prompt_template:
# terminus-2-*` reads their prompt wording from it at run time. Idempotent: a stamp file records
# what was installed (the requirements, one line), and an environment that has them is left alone.
#   usage: envs/refenv.sh DIR REQUIREMENTS [EXTRA ...]
#     REQUIREMENTS: the pins (src/horizon/assets/reference.txt); EXTRA: more requirements installed with
#     them, e.g. 'harbor[daytona]' for a Harbor cloud environment; REF_PY=/path/to/python3.12 to choose
#     the interpreter
set -eu
dir=$1
reqs=$2
shift 2
# the pins as one line (comments and blank lines dropped) and the extras: what the stamp holds
pkgs=$(sed -e 's/#.*//' -e 's/[[:space:]]*$//' "$reqs" | grep -v '^$' | tr '\n' ' ' | sed 's/ $//')
[ $# -eq 0 ] || pkgs="$pkgs $*"
stamp="$dir/.installed"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$pkgs" ] && [ -x "$dir/bin/python" ]; then
  exit 0
fi

ok() { "$1" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1; }
py=""
for cand in ${REF_PY:-} \
    $(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.1[2-9]*/bin/python 2>/dev/null | sort -V) \
    $(command -v python3.12 python3.13 python3.14 2>/dev/null); do
  if ok "$cand"; then py=$cand; break; fi
done
if [ -z "$py" ]; then
  echo "refenv: no Python >= 3.12 found (looked at REF_PY, ${PYENV_ROOT:-$HOME/.pyenv}/versions/3.12+," \
       "python3.12/3.13/3.14 on PATH); install one (e.g. pyenv install 3.12) or set REF_PY" >&2
  exit 1
fi
echo "refenv: $pkgs into $dir with $py ($("$py" --version 2>&1))"
rm -rf "$dir"
"$py" -m venv "$dir"
"$dir/bin/python" -m pip install -q --upgrade pip
"$dir/bin/python" -m pip install -q -r "$reqs" "$@"
printf '%s' "$pkgs" > "$stamp"
