"use strict";
// The Node client (a child process running `symorva serve --stdio`) against the real Synapse
// and services. Needs a dev environment started with --test and its env file in the environment
// (Scripts/test runs it); skipped without one unless SYMORVA_REQUIRE_SERVERS=1.
const { after, test } = require("node:test");
const assert = require("node:assert/strict");
const crypto = require("node:crypto");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { Client, SymorvaError } = require("..");

const { SYMORVA_HOMESERVER_URL: homeserver, SYMORVA_SERVICES_URL: services, SYMORVA_MANIFEST: manifest } = process.env;
const ready = homeserver && services && manifest && process.env.SYMORVA_TEST_MODE === "1";
if (!ready && process.env.SYMORVA_REQUIRE_SERVERS === "1") throw new Error("dev servers required but their env file is not loaded");
const options = { skip: ready ? false : "no dev environment in test mode", timeout: 240_000 };
const PIN = "5813";

async function http(method, url, body, token) {
  const response = await fetch(url, {
    method,
    headers: { "Content-Type": "application/json", ...(token ? { Authorization: `Bearer ${token}` } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  assert.ok(response.ok, `${method} ${url}: ${response.status}`);
  const text = await response.text();
  return text ? JSON.parse(text) : {};
}

/** A test account outside the SDK that credits wallets and arms faults (test endpoints). */
async function operator() {
  const name = "op" + crypto.randomBytes(5).toString("hex");
  const registered = await http("POST", `${homeserver}/_matrix/client/v3/register`, {
    username: name, password: crypto.randomBytes(12).toString("hex"), auth: { type: "m.login.dummy" },
  });
  const openid = await http("POST", `${homeserver}/_matrix/client/v3/user/${encodeURIComponent(registered.user_id)}/openid/request_token`, {}, registered.access_token);
  const { access_token: token } = await http("POST", `${services}/_symorva/v1/auth/openid`, openid);
  return {
    credit: (userID, amount) => http("POST", `${services}/_symorva/v1/test/wallet/credit`, { user_id: userID, asset: "ORB", amount }, token),
    armConfirmFault: (mode) => http("POST", `${services}/_symorva/v1/test/faults`, {
      path_prefix: "/_symorva/v1/wallet/transfers/confirm", method: "POST", mode, count: 1,
    }, token),
    clearFaults: () => http("DELETE", `${services}/_symorva/v1/test/faults`, undefined, token),
  };
}

// Every child started; a test that fails before its close() would otherwise leave its child
// running and the runner waiting for it.
const started = [];
after(() => { for (const client of started) client._child.kill(); });

async function newClient(prefix, handlers) {
  const dataDirectory = fs.mkdtempSync(path.join(os.tmpdir(), "symorva-node-"));
  const client = await Client.start({ manifest, dataDirectory, handlers, stderr: "ignore" });
  started.push(client);
  const account = await client.session.register(prefix + crypto.randomBytes(4).toString("hex"), crypto.randomBytes(12).toString("hex"));
  return { client, account };
}

function until(observable, predicate, timeout = 60_000) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => { stop(); reject(new Error("timed out: " + JSON.stringify(observable.value).slice(0, 300))); }, timeout);
    const stop = observable.subscribe((value) => {
      if (predicate(value)) { clearTimeout(timer); queueMicrotask(() => stop()); resolve(value); }
    });
  });
}

async function rejection(promise) {
  try { await promise; } catch (error) { assert.ok(error instanceof SymorvaError, String(error)); return error; }
  assert.fail("expected a SymorvaError");
}

test("register, a room, a message seen through the timeline subscription", options, async () => {
  const { client, account } = await newClient("ndc");
  assert.match(account.userID, /^@ndc/);
  const roomID = await client.chat.createRoom({ name: "Contract" });
  const conversation = await client.chat.conversation(roomID);
  const timeline = await conversation.timeline();
  await conversation.send("hello from node");
  const items = await until(timeline, (items) => items.some((item) => item.content.body === "hello from node" && item.eventID));
  assert.ok(items.some((item) => item.isOwn));
  await timeline.close();
  if (client.directory) assert.equal((await client.directory.refreshOwnProfile()).userID, account.userID);
  await client.close();
});

test("a transfer settles; an unknown one is queried, never resent", options, async () => {
  const op = await operator();
  const alice = await newClient("ndw");
  const bob = await newClient("ndw");
  await op.credit(alice.account.userID, "50.00");
  await alice.client.wallet.setPIN(PIN);
  let draft = await alice.client.wallet.prepareTransfer(bob.account.userID, "ORB", "5.00");
  const settled = await draft.confirm(PIN);
  assert.equal(settled.kind, "settled");
  await op.armConfirmFault("commit_then_drop");
  let unknown;
  try {
    draft = await alice.client.wallet.prepareTransfer(bob.account.userID, "ORB", "7.00");
    unknown = await draft.confirm(PIN);
  } finally {
    await op.clearFaults();
  }
  assert.equal(unknown.kind, "unknown");
  const resolved = await alice.client.wallet.query(unknown.pending);
  assert.equal(resolved.kind, "settled");
  const orb = (await alice.client.wallet.refreshBalances()).find((b) => b.asset.code === "ORB");
  assert.equal(orb.amount.value, "38.00");
  await alice.client.close();
  await bob.client.close();
});

test("a meeting join returns the admitted role", options, async () => {
  const { client } = await newClient("ndm");
  const roomID = await client.chat.createRoom({ name: "Meeting" });
  const room = await client.meetings.join(roomID);
  assert.ok(["stage", "listener"].includes(room.role));
  await room.leave();
  await client.close();
});

test("a studio grant the host declines, then one it accepts", options, async () => {
  const answers = ["declined", "approved"];
  const { client } = await newClient("nds", { consent: async () => answers.shift() });
  if (!client.aiStudio) return;
  const roomID = await client.chat.createRoom({ name: "Studio" });
  const conversation = await client.chat.conversation(roomID);
  const receipt = await conversation.send("the budget is approved");
  const state = await client.observe("receipt.state", { receipt: receipt.receipt });
  const sent = await until(state, (value) => value.kind === "sent");
  const scope = { kind: "selectedMessages", eventIDs: [sent.eventID] };
  const declined = await rejection(client.aiStudio.requestGrant(roomID, scope));
  assert.deepEqual([declined.domain, declined.code], ["studio", "declined"]);
  const grant = await client.aiStudio.requestGrant(roomID, scope);
  assert.equal(grant.status, "active");
  await client.aiStudio.revoke(grant);
  await client.close();
});

test("sign-out ends the handles; bad input leaves the client usable", options, async () => {
  const { client } = await newClient("ndo");
  const roomID = await client.chat.createRoom({ name: "Ending" });
  const conversation = await client.chat.conversation(roomID);
  client._child.stdin.write("{not json\n");
  client._child.stdin.write("x".repeat(2 * 1024 * 1024) + "\n");
  assert.equal((await rejection(client.request("chat.nothing"))).code, "methodNotFound");
  assert.equal((await rejection(conversation.send(42))).code, "invalidParams");
  assert.equal((await rejection(client.request("chat.conversation.send", { conversation: "conversation-999", text: "x" }))).code, "invalidHandle");
  assert.deepEqual((await client.request("message.split", { text: "still usable" })).parts, ["still usable"]);
  await client.session.signOut();
  const ended = await rejection(conversation.send("after sign-out"));
  assert.deepEqual([ended.domain, ended.code], ["chat", "accountEnded"]);
  await client.close();
});

test("room management, profile, ignoring and devices", options, async () => {
  const { client: alice, account } = await newClient("ndr");
  const { client: bob, account: bobAccount } = await newClient("ndr");
  const roomID = await alice.chat.createRoom({ name: "Before" });
  const conversations = await alice.chat.conversations();
  await alice.chat.setRoomName(roomID, "Managed from node");
  await alice.chat.setRoomTopic(roomID, "Topic from node");
  await until(conversations, (list) => list.items.some((item) => item.id === roomID && item.name === "Managed from node" && item.topic === "Topic from node"));
  await conversations.close();
  await alice.chat.setHistoryVisibility(roomID, "invited");
  assert.equal((await rejection(alice.chat.setHistoryVisibility(roomID, "nobody"))).code, "invalidParams");

  await alice.chat.setJoinRule(roomID, "knock");
  assert.equal(await bob.chat.knock(roomID, { reason: "node knocks" }), roomID);
  const deadline = Date.now() + 60_000;
  while (!(await alice.chat.knocks(roomID)).includes(bobAccount.userID)) {
    assert.ok(Date.now() < deadline, "Bob's knock never showed");
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  await alice.chat.acceptKnock(roomID, bobAccount.userID);
  await bob.chat.join(roomID);
  await alice.chat.setPowerLevel(roomID, bobAccount.userID, 10);
  await alice.chat.kick(bobAccount.userID, roomID, "node kick");

  await alice.chat.setDisplayName("Alice from node");
  await alice.chat.ignore(bobAccount.userID);
  assert.deepEqual(await alice.chat.ignoredUsers(), [bobAccount.userID]);
  await alice.chat.unignore(bobAccount.userID);
  assert.deepEqual(await alice.chat.ignoredUsers(), []);

  const devices = await alice.session.devices();
  assert.deepEqual(devices.map((device) => device.isCurrent), [true]);
  await alice.session.renameDevice(devices[0].deviceID, "Node desktop");
  assert.equal((await alice.session.devices())[0].displayName, "Node desktop");
  assert.equal((await rejection(alice.session.removeDevice(devices[0].deviceID, ""))).code, "invalidParams");
  assert.equal(account.deviceID, devices[0].deviceID);
  await alice.close();
  await bob.close();
});

test("encryption: recovery set up, the key backup in use, typed errors", options, async () => {
  const { client } = await newClient("nde");
  // The first sign-in bootstraps the cross-signing identity (the strict default, docs/e2ee.md):
  // "none" until it is made, then "ready"; no backup until recovery is set up.
  const deadline = Date.now() + 60_000;
  for (;;) {
    let identity;
    try { identity = await client.encryption.identityState(); } catch (error) {
      assert.equal(error.code, "notReady");
    }
    if (identity !== undefined) {
      assert.ok(["none", "ready"].includes(identity.kind), JSON.stringify(identity));
      if (identity.kind === "ready") break;
    }
    assert.ok(Date.now() < deadline, "the identity was never bootstrapped");
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  assert.equal((await client.encryption.backupStatus()).version, null);
  // The identity state answers before the crypto account has loaded its keys: retried on notReady.
  const recoveryKey = await eventually(() => client.encryption.setUpRecovery(), "notReady");
  assert.ok(recoveryKey.length >= 48);
  assert.deepEqual(await client.encryption.identityState(), { kind: "ready" });
  const status = await client.encryption.backupStatus();
  assert.ok(status.version);
  assert.equal((await rejection(client.encryption.enableBackup("***"))).code, "invalidParams");
  const mismatch = await rejection(client.encryption.enableBackup(Buffer.alloc(32, 7).toString("base64")));
  assert.deepEqual([mismatch.domain, mismatch.code], ["encryption", "keyMismatch"]);
  const identityObserved = await client.encryption.identity();
  assert.deepEqual(identityObserved.value, { kind: "ready" });
  await identityObserved.close();
  await client.close();
});

test("spaces: a space, a linked room, its hierarchy through a handle", options, async () => {
  const { client } = await newClient("nds");
  const spaceID = await client.chat.createSpace("Node space", { topic: "from node" });
  const roomID = await client.chat.createRoom({ name: "Linked from node" });
  await client.chat.addToSpace(roomID, spaceID, { suggested: true });
  const hierarchy = await client.chat.hierarchy(spaceID, 5);
  assert.equal(hierarchy.spaceID, spaceID);
  const state = await hierarchy.state();
  const loaded = await hierarchy.loadNextPage();
  assert.deepEqual(loaded.rooms.map((room) => room.id).sort(), [roomID, spaceID].sort());
  await until(state, (value) => value.isComplete);
  await state.close();
  await client.chat.removeFromSpace(roomID, spaceID);
  assert.equal((await rejection(client.chat.joinVia(roomID, []))).code, "invalidParams");
  await client.close();
});

test("an attachment: sent with its caption, the other account downloads the same bytes", options, async () => {
  const alice = await newClient("nda");
  const bob = await newClient("nda");
  const roomID = await alice.client.chat.createRoom({ name: "Files", invitees: [bob.account.userID] });
  await bob.client.chat.join(roomID);
  const folder = fs.mkdtempSync(path.join(os.tmpdir(), "symorva-node-files-"));
  const data = crypto.randomBytes(200_000);
  const source = path.join(folder, "report.bin");
  fs.writeFileSync(source, data);
  const conversation = await alice.client.chat.conversation(roomID);
  const receipt = await conversation.sendAttachment(source, "application/pdf", { caption: "The report", fileName: "report.pdf" });
  assert.equal(receipt.roomID, roomID);
  const bobConversation = await bob.client.chat.conversation(roomID);
  const timeline = await bobConversation.timeline();
  const items = await until(timeline, (items) => items.some((item) => item.content.kind === "file" && item.eventID), 120_000);
  const item = items.find((item) => item.content.kind === "file");
  assert.deepEqual([item.content.media.body, item.content.media.fileName, item.content.media.mimeType], ["The report", "report.pdf", "application/pdf"]);
  const target = path.join(folder, "copy.pdf");
  assert.equal(await bobConversation.download(item.eventID, target), data.length);
  assert.ok(fs.readFileSync(target).equals(data));
  const missing = await rejection(bobConversation.download("$nothing-here", target));
  assert.deepEqual([missing.domain, missing.code], ["chat", "unknownEvent"]);
  await timeline.close();
  await alice.client.close();
  await bob.client.close();
});

/** Calls `probe` until it answers truthy (a failure with code `retried` counts as not yet). */
async function eventually(probe, retried = null, timeout = 60_000) {
  const deadline = Date.now() + timeout;
  for (;;) {
    try {
      const answer = await probe();
      if (answer) return answer;
    } catch (error) {
      if (!(error instanceof SymorvaError) || error.code !== retried) throw error;
    }
    assert.ok(Date.now() < deadline, "timed out waiting for a condition");
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

test("verification: two accounts compare the emoji and both end verified", options, async () => {
  const alice = await newClient("ndv");
  const bob = await newClient("ndv");
  const bobID = bob.account.userID;
  const roomID = await alice.client.chat.createRoom({ name: "Verify", invitees: [bobID], isEncrypted: true });
  await bob.client.chat.join(roomID);
  await eventually(() => alice.client.encryption.setUpRecovery(), "notReady");
  await eventually(() => bob.client.encryption.setUpRecovery(), "notReady");
  const bobDevice = (await bob.client.session.devices())[0].deviceID;
  const trustOf = async (client, userID, deviceID) =>
    (await client.encryption.devices(userID)).find((device) => device.deviceID === deviceID)?.trust;
  await eventually(async () => (await trustOf(alice.client, bobID, bobDevice)) === "crossSigned");
  const incoming = await bob.client.encryption.incomingVerification();
  const outgoing = await alice.client.encryption.verify(bobID, { deviceID: bobDevice });
  const info = await until(incoming, (value) => value !== null);
  assert.equal(info.transactionID, outgoing.transactionID);
  const answer = bob.client.encryption.verification(info);
  const aliceState = await outgoing.state();
  const bobState = await answer.state();
  await answer.accept();
  await until(aliceState, (state) => state.kind === "ready");
  await outgoing.startSAS();
  const shown = (state) => state.kind === "showingCode" || state.kind === "cancelled";
  const aliceCode = await until(aliceState, shown);
  const bobCode = await until(bobState, shown);
  assert.equal(aliceCode.kind, "showingCode");
  assert.deepEqual(bobCode, aliceCode);
  assert.equal(aliceCode.emoji.length, 7);
  await outgoing.confirm();
  await answer.confirm();
  await until(aliceState, (state) => state.kind === "verified");
  await until(bobState, (state) => state.kind === "verified");
  await eventually(async () => (await trustOf(alice.client, bobID, bobDevice)) === "verified");
  for (const observed of [incoming, aliceState, bobState]) await observed.close();
  await alice.client.close();
  await bob.client.close();
});
