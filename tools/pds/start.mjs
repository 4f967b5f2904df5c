// The AT Protocol reference PDS and PLC directory (npm @atproto/dev-env's
// TestNetworkNoAppView, both in this one process) for the Bluesky channel tests and
// `make dev`. Run by tools/pds/run with the Node 22 that tools/pds/install.sh put under
// .local/pds (PDS_HOME overrides that directory).
//
// Prints exactly one line to stdout, {"pds_url": "http://127.0.0.1:<port>", "plc_url":
// "http://127.0.0.1:<port>"}, once both serve; everything else goes to stderr. Stops when
// stdin reaches EOF (its parent went away) or on SIGTERM/SIGINT.
//
// Loopback only: every server is bound to 127.0.0.1, and outbound connections, DNS
// look-ups and DNS queries for anything but loopback fail at once inside this process, so
// nothing (an app view, plc.directory, a relay, did:web or handle DNS) is ever contacted.

import dns from 'node:dns'
import fs from 'node:fs'
import module, { createRequire, syncBuiltinESMExports } from 'node:module'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

// Only the JSON line goes to stdout.
console.log = console.info = console.debug = console.error
// The PDS logs every request otherwise.
process.env.LOG_ENABLED ??= 'false'

// ---- loopback only ----

const isLoopback = (host) => {
  const h = String(host).toLowerCase().replace(/^\[(.*)\]$/, '$1')
  if (h === 'localhost' || h === 'localhost.') return true
  if (net.isIPv4(h)) return h.startsWith('127.')
  if (net.isIPv6(h)) return h === '::1' || /^::ffff:127\./.test(h)
  return false
}
const blocked = (host, syscall) =>
  Object.assign(new Error(`${syscall} ENOTFOUND ${host} (tools/pds reaches loopback only)`), {
    code: 'ENOTFOUND',
    hostname: host,
    syscall,
  })

// Servers given only a port (dev-env, the PDS, the PLC and get-port all are) listen on
// 127.0.0.1 rather than on every interface.
const listen = net.Server.prototype.listen
net.Server.prototype.listen = function (...args) {
  const a = args[0]
  if (typeof a === 'number' || (typeof a === 'string' && /^\d+$/.test(a))) {
    if (typeof args[1] !== 'string') args.splice(1, 0, '127.0.0.1')
  } else if (a && typeof a === 'object' && a.path === undefined && a.handle === undefined && a.fd === undefined) {
    if (a.host === undefined) args[0] = { ...a, host: '127.0.0.1' }
  }
  return listen.apply(this, args)
}

// Name look-ups (every outbound connection to a host name goes through dns.lookup).
const lookup = dns.lookup
dns.lookup = function (host, options, callback) {
  if (typeof options === 'function') [callback, options] = [options, {}]
  if (!isLoopback(host)) {
    process.nextTick(callback, blocked(host, 'getaddrinfo'))
    return {}
  }
  return lookup.call(this, host, options, callback)
}
const lookupPromise = dns.promises.lookup
dns.promises.lookup = async function (host, options) {
  if (!isLoopback(host)) throw blocked(host, 'getaddrinfo')
  return lookupPromise.call(this, host, options)
}
// DNS queries (handle TXT records): none.
for (const target of [dns, dns.Resolver.prototype]) {
  for (const name of Object.keys(target).concat(Object.getOwnPropertyNames(target))) {
    if (/^(resolve|reverse)/.test(name) && typeof target[name] === 'function') {
      target[name] = function (host, ...rest) {
        process.nextTick(rest.at(-1), blocked(host, 'query'))
      }
    }
  }
}
for (const target of [dns.promises, dns.promises.Resolver.prototype]) {
  for (const name of Object.keys(target).concat(Object.getOwnPropertyNames(target))) {
    if (/^(resolve|reverse)/.test(name) && typeof target[name] === 'function') {
      target[name] = async (host) => {
        throw blocked(host, 'query')
      }
    }
  }
}
// Connections to an IP address (no look-up): loopback only.
const connect = net.Socket.prototype.connect
net.Socket.prototype.connect = function (...args) {
  const a = Array.isArray(args[0]) ? args[0] : args
  let host
  if (a[0] && typeof a[0] === 'object') host = a[0].path === undefined ? a[0].host : undefined
  else if (typeof a[0] === 'number' || (typeof a[0] === 'string' && /^\d+$/.test(a[0])))
    host = typeof a[1] === 'string' ? a[1] : undefined
  if (host !== undefined && net.isIP(String(host).replace(/^\[(.*)\]$/, '$1')) && !isLoopback(host)) {
    process.nextTick(() => this.destroy(blocked(host, 'connect')))
    return this
  }
  return connect.apply(this, args)
}
syncBuiltinESMExports()

// ---- the network ----

const home = process.env.PDS_HOME ?? path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../.local/pds')
// Loading the PDS's modules is most of the start-up: keep V8's compiled code between runs,
// and load only dev-env's TestNetworkNoAppView, not the app view, ozone and sharp its index
// also pulls in.
module.enableCompileCache?.(path.join(home, '.compile-cache'))
const devEnv = createRequire(path.join(home, 'package.json')).resolve('@atproto/dev-env')
const noAppView = path.join(path.dirname(devEnv), 'network-no-appview.js')
const { TestNetworkNoAppView } = await import(pathToFileURL(fs.existsSync(noAppView) ? noAppView : devEnv).href)

// The PDS keeps its SQLite files and blobs under os.tmpdir(): give this run a directory of
// its own, removed on exit, and remove those of earlier runs that were killed.
const tmpRoot = os.tmpdir()
const prefix = 'atproto-pds-'
for (const name of fs.readdirSync(tmpRoot)) {
  const pid = Number(name.startsWith(prefix) && name.slice(prefix.length).split('-')[0])
  if (!pid || pid === process.pid) continue
  try {
    process.kill(pid, 0)
  } catch (err) {
    if (err.code === 'ESRCH') fs.rmSync(path.join(tmpRoot, name), { recursive: true, force: true })
  }
}
const dataDir = fs.mkdtempSync(path.join(tmpRoot, `${prefix}${process.pid}-`))
process.env.TMPDIR = dataDir // read by TestPds.create (dev-env's port locks stay in the real tmpdir)
process.on('exit', () => fs.rmSync(dataDir, { recursive: true, force: true }))

let network
try {
  network = await TestNetworkNoAppView.create({
    pds: {
      hostname: 'localhost', // public URL http://localhost:<port>, service DID did:web:localhost
      // dev-env points these at https://*.invalid; with none configured, app.bsky.* reads
      // and getRecord of a repo not on this PDS answer 400 at once instead of being proxied.
      // The admin password (Basic admin:admin-pass) and JWT secret stay dev-env's.
      bskyAppViewUrl: undefined,
      bskyAppViewDid: undefined,
      bskyAppViewCdnUrlPattern: undefined,
      modServiceUrl: undefined,
      modServiceDid: undefined,
      crawlers: [],
      // Off as in dev-env; PDS_RATE_LIMITS_ENABLED=true turns on the PDS's own (in-memory)
      // limits, e.g. createSession's 30 per 5 minutes per account, with RateLimit-* headers.
      rateLimitsEnabled: process.env.PDS_RATE_LIMITS_ENABLED === 'true',
    },
  })
} catch (err) {
  console.error('tools/pds: the PDS did not start:', err)
  process.exit(1)
}

let closing = false
const stop = async () => {
  if (closing) return
  closing = true
  const timer = setTimeout(() => process.exit(1), 5000)
  timer.unref()
  try {
    await network.close()
  } catch (err) {
    console.error('tools/pds: while stopping:', err)
  }
  process.exit(0)
}
process.on('SIGTERM', stop)
process.on('SIGINT', stop)
process.on('SIGHUP', stop)
process.stdin.on('end', stop)
process.stdin.on('error', stop)
process.stdout.on('error', stop)
process.stdin.resume()

process.stdout.write(
  JSON.stringify({
    pds_url: `http://127.0.0.1:${network.pds.port}`,
    plc_url: `http://127.0.0.1:${network.plc.port}`,
  }) + '\n',
)
