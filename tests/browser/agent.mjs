// An agent: the official MCP TypeScript SDK's client against the MCP server, one step per run
// (tests/tests/mcp.rs drives it). Prints one JSON document on stdout.
//   node agent.mjs <url> <bearer> tools
//   node agent.mjs <url> <bearer> call <tool> <arguments as JSON> [--elicitation-url]
//   node agent.mjs <url> <bearer> resources
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, bearer, step, ...rest] = process.argv.slice(2);
const elicitation = rest.includes("--elicitation-url");
const capabilities = elicitation ? { elicitation: { url: {} } } : {};
const client = new Client({ name: "e2e-agent", version: "1.0.0" }, { capabilities });
const headers = { Authorization: `Bearer ${bearer}` };
if (process.env.WORKSPACE_ID) headers["x-workspace-id"] = process.env.WORKSPACE_ID;
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });

const out = {};
try {
  await client.connect(transport);
  out.server = client.getServerVersion();
  out.protocol = transport.protocolVersion ?? null;
  if (step === "tools") {
    out.pages = [];
    let cursor;
    do {
      const page = await client.listTools(cursor ? { cursor } : {});
      out.pages.push({ count: page.tools.length, bytes: JSON.stringify(page).length });
      out.tools = (out.tools ?? []).concat(page.tools);
      cursor = page.nextCursor;
    } while (cursor);
  } else if (step === "call") {
    const [name, args] = rest;
    out.result = await client.callTool({ name, arguments: JSON.parse(args) });
  } else if (step === "resources") {
    out.resources = (await client.listResources()).resources;
    out.contract = (await client.readResource({ uri: "workspace-platform://openapi.json" })).contents[0];
    out.contract = { mimeType: out.contract.mimeType, openapi: JSON.parse(out.contract.text).openapi };
  }
} catch (e) {
  out.error = { name: e.constructor?.name, code: e.code, message: e.message, data: e.data };
} finally {
  await client.close().catch(() => {});
}
process.stdout.write(JSON.stringify(out));
