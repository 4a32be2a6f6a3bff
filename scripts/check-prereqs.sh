#!/bin/sh
# Prerequisites of `make`: one line per missing tool, saying what to install. POSIX sh and
# shell built-ins only, so it runs (and can be tested) before anything else exists.
#
#   scripts/check-prereqs.sh PYTHON [--npm]
#
# PYTHON is the interpreter make will use (.venv/bin/python once it exists, else $(PYTHON)).
# --npm also requires npm (the targets that run the pinned CDK CLI: bootstrap, deploy, destroy).
PYTHON_MIN_MAJOR=3
PYTHON_MIN_MINOR=11
NODE_MIN_MAJOR=18

python=${1:-python3}
need_npm=no
[ "${2:-}" = "--npm" ] && need_npm=yes
problems=0

say() {
    echo "sagewarden: $*" >&2
    problems=$((problems + 1))
}

if ! command -v "$python" >/dev/null 2>&1; then
    say "Python $PYTHON_MIN_MAJOR.$PYTHON_MIN_MINOR+ not found ('$python'): install Python 3.11 or newer (python.org, brew install python@3.12, apt install python3.12 python3.12-venv), or pass PYTHON=/path/to/python3.12"
else
    version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
    major=${version%%.*}
    minor=${version#*.}
    case "$major$minor" in
        '' | *[!0-9]*)
            say "cannot run '$python' to read its version: install Python 3.11 or newer, or pass PYTHON=/path/to/python3.12"
            ;;
        *)
            if [ "$major" -lt "$PYTHON_MIN_MAJOR" ] || { [ "$major" -eq "$PYTHON_MIN_MAJOR" ] && [ "$minor" -lt "$PYTHON_MIN_MINOR" ]; }; then
                say "'$python' is Python $version; sagewarden needs $PYTHON_MIN_MAJOR.$PYTHON_MIN_MINOR+: install Python 3.11 or newer and pass PYTHON=/path/to/python3.12 (or remove an old .venv)"
            fi
            ;;
    esac
fi

if ! command -v node >/dev/null 2>&1; then
    say "Node.js not found (the CDK needs it, even to synthesize offline): install Node.js $NODE_MIN_MAJOR+ (22 LTS recommended: nodejs.org, brew install node@22, or nvm install 22)"
else
    node_version=$(node --version 2>/dev/null)
    node_version=${node_version#v}
    node_major=${node_version%%.*}
    case "$node_major" in
        '' | *[!0-9]*) say "cannot read the version of 'node': install Node.js $NODE_MIN_MAJOR+ (22 LTS recommended)" ;;
        *)
            if [ "$node_major" -lt "$NODE_MIN_MAJOR" ]; then
                say "Node.js $node_version is too old; the CDK needs $NODE_MIN_MAJOR+: install Node.js 22 LTS (nodejs.org, brew install node@22, or nvm install 22)"
            fi
            ;;
    esac
fi

if [ "$need_npm" = yes ] && ! command -v npm >/dev/null 2>&1; then
    say "npm not found (it installs the pinned CDK CLI): install it with Node.js (some Linux packages split it out: apt install npm)"
fi

[ "$problems" -eq 0 ]
