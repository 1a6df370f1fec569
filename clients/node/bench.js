"use strict";
// Round trip of a trivial request (`message.split`) through `symorva serve --stdio` from Node,
// one at a time: p50 and p99 in milliseconds (docs/benchmarks.md, "contract").
//   SYMORVA_BIN=.build/release/symorva node clients/node/bench.js MANIFEST [REQUESTS]
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { Client } = require(".");

async function main() {
  const [manifest, count = "5000"] = process.argv.slice(2);
  if (!manifest) throw new Error("usage: node bench.js MANIFEST [REQUESTS]");
  const dataDirectory = fs.mkdtempSync(path.join(os.tmpdir(), "symorva-node-bench-"));
  const client = await Client.start({ manifest, dataDirectory, stderr: "ignore" });
  for (let i = 0; i < 500; i++) await client.request("message.split", { text: "ping" });
  const samples = [];
  for (let i = 0; i < Number(count); i++) {
    const start = process.hrtime.bigint();
    await client.request("message.split", { text: "ping" });
    samples.push(Number(process.hrtime.bigint() - start) / 1e6);
  }
  samples.sort((a, b) => a - b);
  const at = (q) => samples[Math.min(samples.length - 1, Math.ceil(q * samples.length) - 1)];
  console.log(`contract: stdio round trip from Node (message.split), ${samples.length} requests: p50 ${at(0.5).toFixed(3)} ms, p99 ${at(0.99).toFixed(3)} ms`);
  await client.close();
  fs.rmSync(dataDirectory, { recursive: true, force: true });
}

main().catch((error) => { console.error(error); process.exit(1); });
