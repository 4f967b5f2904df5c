// The AT Protocol reference PDS and PLC directory (npm @atproto/dev-env's
// TestNetworkNoAppView) for the Bluesky channel tests and `make dev`. Run by tools/pds/run
// with the Node 22 that tools/pds/install.sh put under .local/pds.
//
// Prints one line, {"pds_url": ..., "plc_url": ...}, when both serve, and stops when stdin
// closes (its parent went away) or on SIGTERM. Every server binds 127.0.0.1; handle
// resolution is mocked by dev-env, and no crawler or app view is configured, so nothing
// leaves the machine.

import net from 'node:net'
import path from 'node:path'
import { pathToFileURL } from 'node:url'

// dev-env and the PDS listen on a port without a host (all interfaces): pin them to loopback.
const listen = net.Server.prototype.listen
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' && typeof args[1] !== 'string') {
    args.splice(1, 0, '127.0.0.1')
  } else if (args[0] && typeof args[0] === 'object' && args[0].host === undefined && args[0].port !== undefined) {
    args[0] = { ...args[0], host: '127.0.0.1' }
  }
  return listen.apply(this, args)
}

// Quiet: the PDS logs every request otherwise.
process.env.LOG_ENABLED = process.env.LOG_ENABLED ?? 'false'

const home = process.env.PDS_HOME ?? path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../.local/pds')
const devEnv = await import(pathToFileURL(path.join(home, 'node_modules/@atproto/dev-env/dist/index.js')).href)
const network = await devEnv.TestNetworkNoAppView.create({})
process.stdout.write(JSON.stringify({ pds_url: network.pds.url, plc_url: network.plc.url }) + '\n')

let closing = false
const stop = async () => {
  if (closing) return
  closing = true
  await network.close().catch(() => {})
  process.exit(0)
}
process.stdin.on('end', stop)
process.stdin.on('error', stop)
process.stdin.resume()
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
