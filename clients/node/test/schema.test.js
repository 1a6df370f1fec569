"use strict";
// The Node client's schema checks without servers (Scripts/contract-test --unit): the validator
// reads every keyword contract/symorva.schema.json uses, accepts and refuses the same samples as
// the Python client's, and a Client with a schema refuses an answer whose result or update the
// contract does not allow (a Client over a child process that answers with `node -e`: the
// protocol's own framing, no SDK).
const { test } = require("node:test");
const assert = require("node:assert/strict");
const { spawn } = require("node:child_process");
const { Schema, SchemaViolation } = require("../schema");
const { Client } = require("..");

const schema = Schema.load();
const accepts = (check, ...args) => assert.doesNotThrow(() => check.apply(schema, args));
const refuses = (check, ...args) => assert.throws(() => check.apply(schema, args), SchemaViolation);

test("every method and path has its schemas", () => {
  const defs = schema.document.$defs;
  for (const [name, entry] of Object.entries(defs.methods)) assert.deepEqual(Object.keys(entry).sort(), ["params", "result"], name);
  for (const [name, entry] of Object.entries(defs.paths)) assert.deepEqual(Object.keys(entry).sort(), ["params", "value"], name);
  assert.deepEqual([...defs.method.enum].sort(), Object.keys(defs.methods).sort());
});

test("a schema with a keyword the validator does not read is refused", () => {
  assert.throws(() => new Schema({ $defs: { x: { type: "string", pattern: "^a" } } }), /does not read the keyword pattern/);
});

test("samples are accepted and refused", () => {
  accepts(schema.checkParams, "chat.kick", { roomID: "!a:b", userID: "@c:d", reason: null });
  refuses(schema.checkParams, "chat.kick", { roomID: "!a:b" });
  refuses(schema.checkParams, "chat.conversation.send", { conversation: "conversation-1", text: 42 });
  accepts(schema.checkParams, "session.signOut", {});
  refuses(schema.checkParams, "session.signOut", { extra: 1 });
  accepts(schema.checkResult, "draft.confirm", { kind: "failed", reason: { kind: "wrongPIN", attemptsLeft: 2 } });
  refuses(schema.checkResult, "draft.confirm", { kind: "maybe" });
  accepts(schema.checkParams, "chat.conversation.sendAttachment", {
    conversation: "conversation-1", path: "/tmp/a.png", contentType: "image/png", kind: "image", caption: "c",
  });
  refuses(schema.checkParams, "chat.conversation.sendAttachment", { conversation: "conversation-1", path: "/tmp/a", contentType: "x/y", kind: "sticker" });
  accepts(schema.checkResult, "chat.conversation.download", { size: 12 });
  accepts(schema.checkValue, "conversation.uploads", [{ transactionID: "t", completedBytes: 5, totalBytes: 10 }]);
  refuses(schema.checkValue, "conversation.uploads", [{ transactionID: "t" }]);
  accepts(schema.checkValue, "verification.state", {
    kind: "showingCode", emoji: [{ character: "🐶", description: "Dog" }], decimals: [1234, 5678, 9012],
  });
  refuses(schema.checkValue, "verification.state", { kind: "showingCode", emoji: [] });
  accepts(schema.checkValue, "verification.state", { kind: "cancelled", code: "m.user", byUs: true });
  accepts(schema.checkValue, "verification.incoming", null);
  accepts(schema.checkValue, "session.state", { kind: "signedOut" });
  refuses(schema.checkValue, "session.state", { kind: "signedIn" });
  accepts(schema.checkMessage, { id: 3, error: { domain: "verification", code: "notReady", message: "m" } });
  refuses(schema.checkMessage, { id: 3, error: { domain: "somewhere", code: "x", message: "m" } });
  accepts(schema.checkMessage, { update: { subscription: "sub-1", value: [1] } });
  accepts(schema.checkMessage, { closed: true });
});

// A child answering each request line with the canned message for its method (the id copied).
function cannedChild(answers) {
  const program = `
    const answers = ${JSON.stringify(answers)};
    require("node:readline").createInterface({ input: process.stdin }).on("line", (line) => {
      const request = JSON.parse(line);
      for (const message of answers[request.method] || []) {
        process.stdout.write(JSON.stringify("result" in message || "error" in message ? { id: request.id, ...message } : message) + "\\n");
      }
    });`;
  return spawn(process.execPath, ["-e", program], { stdio: ["pipe", "pipe", "inherit"] });
}

test("a Client with the schema refuses a result and an update the contract does not allow", async () => {
  const child = cannedChild({
    "chat.conversation.download": [{ result: { size: "twelve" } }],
    "chat.ignoredUsers": [{ result: { userIDs: ["@a:b"] } }],
    subscribe: [{ result: { subscription: "sub-1", value: [] } }, { update: { subscription: "sub-1", value: [{ transactionID: 7 }] } }],
  });
  const client = new Client(child, {}, schema);
  await assert.rejects(
    client.request("chat.conversation.download", { conversation: "conversation-1", eventID: "$e", path: "/tmp/x" }),
    SchemaViolation);
  assert.deepEqual(await client.request("chat.ignoredUsers"), { userIDs: ["@a:b"] });
  const uploads = await client.observe("conversation.uploads", { conversation: "conversation-1" });
  // The update arrives after the subscribe answer; the next answer is the barrier.
  await client.request("chat.ignoredUsers");
  assert.deepEqual(uploads.value, [{ transactionID: 7 }]);
  assert.equal(client.schemaViolations.length, 2, client.schemaViolations.join("; "));
  assert.match(client.schemaViolations[1], /conversation\.uploads\.value/);
  await assert.rejects(client.close(), /schema refuses/);
});

test("params that succeeded are checked too (the request fails); without a schema nothing is checked", async () => {
  const answers = { "chat.ignore": [{ result: {} }] };
  const checked = new Client(cannedChild(answers), {}, schema);
  await assert.rejects(checked.request("chat.ignore", { userID: 42 }), SchemaViolation);
  assert.match(checked.schemaViolations[0], /chat\.ignore\.params/);
  await assert.rejects(checked.close(), /schema refuses/);
  const unchecked = new Client(cannedChild(answers), {}, null);
  await unchecked.request("chat.ignore", { userID: 42 });
  assert.deepEqual(unchecked.schemaViolations, []);
  await unchecked.close();
});
