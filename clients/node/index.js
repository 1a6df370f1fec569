"use strict";
// The Symorva client SDK from Node.js: a child process running `symorva serve --stdio`, spoken
// to in JSON lines (docs/contract.md). The API follows contract/symorva.d.ts: a CommunityClient
// with session, chat, meetings and the optional wallet and aiStudio; Observable<T> values.
const { spawn } = require("node:child_process");
const readline = require("node:readline");
const { Schema, SchemaViolation } = require("./schema");

class SymorvaError extends Error {
  constructor(error) {
    super(`${error.domain}.${error.code}: ${error.message}`);
    this.name = "SymorvaError";
    this.domain = error.domain;
    this.code = error.code;
    this.details = error.details;
  }
}

/** An observable value kept current by a subscription's updates. */
class Observed {
  constructor(client, subscription, value) {
    this._client = client;
    this._subscription = subscription;
    this._value = value;
    this._listeners = new Set();
  }
  get value() {
    return this._value;
  }
  subscribe(listener) {
    this._listeners.add(listener);
    listener(this._value);
    return () => this._listeners.delete(listener);
  }
  _publish(value) {
    this._value = value;
    for (const listener of [...this._listeners]) listener(value);
  }
  async close() {
    this._client._observed.delete(this._subscription);
    await this._client.request("unsubscribe", { subscription: this._subscription });
  }
}

class Client {
  /** Starts `symorva serve --stdio` and resolves once it answers. */
  static async start(options) {
    const executable = options.executable || process.env.SYMORVA_BIN || "symorva";
    const args = ["serve", "--stdio", "--config", options.manifest, "--data-dir", options.dataDirectory];
    const child = spawn(executable, args, {
      stdio: ["pipe", "pipe", options.stderr || "inherit"],
      env: { ...process.env, ...(options.env || {}) },
    });
    const validate = options.validate ?? process.env.SYMORVA_VALIDATE_SCHEMA === "1";
    const client = new Client(child, options.handlers || {}, validate ? Schema.load() : null);
    client._build(await client.request("community.modules"));
    return client;
  }

  constructor(child, handlers, schema = null) {
    this._child = child;
    this._handlers = handlers;
    // With a schema, every answer and update is checked against it (see _check).
    this._schema = schema;
    this._sent = new Map();
    this._paths = new Map();
    /** The messages the contract's schema refused (with a schema only); close() throws if any. */
    this.schemaViolations = [];
    this._next = 1;
    this._pending = new Map();
    this._observed = new Map();
    this._exited = new Promise((resolve) => child.on("exit", resolve));
    child.on("exit", () => {
      for (const { reject } of this._pending.values()) reject(new SymorvaError({ domain: "contract", code: "closed", message: "The client is closed." }));
      this._pending.clear();
    });
    readline.createInterface({ input: child.stdout }).on("line", (line) => this._receive(line));
  }

  _receive(line) {
    const message = JSON.parse(line);
    const violation = this._schema ? this._check(message) : null;
    if ("id" in message) {
      const waiting = this._pending.get(message.id);
      if (!waiting) return;
      this._pending.delete(message.id);
      if (violation) waiting.reject(violation);
      else if ("error" in message) waiting.reject(new SymorvaError(message.error));
      else waiting.resolve(waiting.adopt ? waiting.adopt(message.result) : message.result);
    } else if (message.update) {
      const observed = this._observed.get(message.update.subscription);
      if (observed) observed._publish(message.update.value);
    } else if (message.hostRequest) {
      this._answerHost(message.hostRequest);
    }
  }

  /**
   * Checks a message against the schema: an answer's result against its method's (and the params
   * that succeeded against the params schema), a subscription's first value and every update
   * against its path's. Returns the violation (also kept in schemaViolations) or null.
   */
  _check(message) {
    const violation = this._violation(() => {
      this._schema.checkMessage(message);
      if ("id" in message) {
        const sent = this._sent.get(message.id);
        this._sent.delete(message.id);
        if (!sent || "error" in message) return;
        const { method, params } = sent;
        if (method === "subscribe") {
          const { path: name, ...arguments_ } = params;
          this._paths.set(message.result.subscription, name);
          this._schema.checkPathParams(name, arguments_);
          this._schema.checkValue(name, message.result.value);
        } else {
          this._schema.checkParams(method, params);
          this._schema.checkResult(method, message.result);
        }
      } else if (message.update) {
        const name = this._paths.get(message.update.subscription);
        if (name !== undefined) this._schema.checkValue(name, message.update.value);
      }
    });
    return violation;
  }

  _violation(check) {
    try {
      check();
      return null;
    } catch (error) {
      if (!(error instanceof SchemaViolation)) throw error;
      this.schemaViolations.push(error.message);
      return error;
    }
  }

  async _answerHost(request) {
    let answer = null;
    try {
      if (request.kind === "consent" && this._handlers.consent) answer = await this._handlers.consent(request.sheet);
      if (request.kind === "pin" && this._handlers.pinEntry) answer = await this._handlers.pinEntry(request.summary);
    } catch (_) {
      answer = null;
    }
    await this.request("host.answer", { request: request.id, answer }).catch(() => {});
  }

  /** Sends one request; resolves with its result, rejects with a SymorvaError. */
  request(method, params = {}, adopt = null) {
    const id = this._next++;
    return new Promise((resolve, reject) => {
      this._pending.set(id, { resolve, reject, adopt });
      const line = JSON.stringify({ id, method, params });
      // What was sent (members that are undefined are not): checked once it succeeded.
      if (this._schema) this._sent.set(id, JSON.parse(line));
      this._child.stdin.write(line + "\n");
    });
  }

  /** Subscribes to an observable path: an Observable whose value is always current. */
  observe(path, params = {}) {
    // Registered as the answer is read, before the updates that may follow it in the same chunk.
    return this.request("subscribe", { path, ...params }, (answer) => {
      const observed = new Observed(this, answer.subscription, answer.value);
      this._observed.set(answer.subscription, observed);
      return observed;
    });
  }

  /** Ends standard input (the server closes its client) and waits for the child to exit. */
  async close() {
    this._child.stdin.end();
    await this._exited;
    if (this.schemaViolations.length > 0) {
      throw new Error(`messages the contract's schema refuses: ${this.schemaViolations.join("; ")}`);
    }
  }

  _build(modules) {
    const call = (method, params) => this.request(method, params);
    const none = async () => {};
    this.session = {
      signIn: (username, password) => call("session.signIn", { username, password }),
      register: (username, password) => call("session.register", { username, password }),
      reauthenticate: (password) => call("session.reauthenticate", { password }),
      signOut: () => call("session.signOut").then(none),
      switchAccount: (userID) => call("session.switchAccount", { userID }),
      removeAccount: (userID) => call("session.removeAccount", { userID }).then(none),
      state: () => this.observe("session.state"),
      accounts: () => this.observe("session.accounts"),
      devices: () => call("session.devices"),
      renameDevice: (deviceID, name) => call("session.renameDevice", { deviceID, name }).then(none),
      removeDevice: (deviceID, password) => call("session.removeDevice", { deviceID, password }).then(none),
    };
    this.chat = {
      conversations: () => this.observe("chat.conversations"),
      refresh: () => call("chat.refresh").then(none),
      createRoom: (options = {}) => call("chat.createRoom", options).then((r) => r.roomID),
      join: (roomIDOrAlias) => call("chat.join", { roomIDOrAlias }).then((r) => r.roomID),
      leave: (roomID) => call("chat.leave", { roomID }).then(none),
      invite: (userID, roomID) => call("chat.invite", { userID, roomID }).then(none),
      kick: (userID, roomID, reason) => call("chat.kick", { userID, roomID, reason }).then(none),
      ban: (userID, roomID, reason) => call("chat.ban", { userID, roomID, reason }).then(none),
      setJoinRule: (roomID, rule, allowedRooms) => call("chat.setJoinRule", { roomID, rule, allowedRooms }).then(none),
      setRoomName: (roomID, name) => call("chat.setRoomName", { roomID, name }).then(none),
      setRoomTopic: (roomID, topic) => call("chat.setRoomTopic", { roomID, topic }).then(none),
      setRoomAvatar: (roomID, path, contentType) =>
        call("chat.setRoomAvatar", { roomID, path, contentType }).then((r) => r.avatarURL),
      setHistoryVisibility: (roomID, visibility) => call("chat.setHistoryVisibility", { roomID, visibility }).then(none),
      setPowerLevel: (roomID, userID, level) => call("chat.setPowerLevel", { roomID, userID, level }).then(none),
      knock: (roomIDOrAlias, options = {}) => call("chat.knock", { roomIDOrAlias, ...options }).then((r) => r.roomID),
      knocks: (roomID) => call("chat.knocks", { roomID }).then((r) => r.userIDs),
      acceptKnock: (roomID, userID) => call("chat.acceptKnock", { roomID, userID }).then(none),
      denyKnock: (roomID, userID, reason) => call("chat.denyKnock", { roomID, userID, reason }).then(none),
      setDisplayName: (name) => call("chat.setDisplayName", { name }).then(none),
      setAvatar: (path, contentType) => call("chat.setAvatar", { path, contentType }).then((r) => r.avatarURL),
      ignore: (userID) => call("chat.ignore", { userID }).then(none),
      unignore: (userID) => call("chat.unignore", { userID }).then(none),
      ignoredUsers: () => call("chat.ignoredUsers").then((r) => r.userIDs),
      joinedSpaces: () => call("chat.joinedSpaces"),
      roomsOfSpace: (spaceID) => call("chat.roomsOfSpace", { spaceID }),
      createSpace: (name, options = {}) => call("chat.createSpace", { name, ...options }).then((r) => r.roomID),
      addToSpace: (roomID, spaceID, options = {}) => call("chat.addToSpace", { roomID, spaceID, ...options }).then(none),
      removeFromSpace: (roomID, spaceID) => call("chat.removeFromSpace", { roomID, spaceID }).then(none),
      joinVia: (roomID, via) => call("chat.joinVia", { roomID, via }).then((r) => r.roomID),
      hierarchy: async (spaceID, pageSize) => this._hierarchy(await call("chat.hierarchy", { spaceID, pageSize })),
      communityRooms: async (pageSize) => this._hierarchy(await call("chat.communityRooms", { pageSize })),
      conversation: async (roomID) => this._conversation(await call("chat.conversation", { roomID })),
    };
    this.meetings = {
      join: async (roomID, options = {}) => {
        const room = await call("meetings.join", { roomID, ...options });
        const act = (method) => () => call(method, { room: room.room }).then(none);
        const handle = { room: room.room };
        const media = {
          state: () => this.observe("meeting.media", handle),
          audioLevels: () => this.observe("meeting.audioLevels", handle),
          connect: act("room.media.connect"),
          setMicrophoneEnabled: (enabled) => call("room.media.setMicrophoneEnabled", { ...handle, enabled }).then(none),
          disconnect: act("room.media.disconnect"),
        };
        const playback = {
          state: () => this.observe("meeting.playback", handle),
          play: act("room.playback.play"), pause: act("room.playback.pause"), stop: act("room.playback.stop"),
        };
        return {
          ...room, handle: room.room, media, playback,
          raiseHand: act("room.raiseHand"), lowerHand: act("room.lowerHand"), leave: act("room.leave"),
        };
      },
    };
    // Optional modules are absent when the manifest disables them (the methods answer moduleDisabled).
    this.wallet = modules.wallet ? {
      balances: () => this.observe("wallet.balances"),
      refreshBalances: () => call("wallet.refreshBalances"),
      history: (limit) => call("wallet.history", limit ? { limit } : {}),
      setPIN: (pin, oldPIN) => call("wallet.setPIN", oldPIN ? { pin, oldPIN } : { pin }).then(none),
      prepareTransfer: async (recipient, asset, amount) => {
        const draft = await call("wallet.prepareTransfer", { recipient, asset, amount });
        return {
          ...draft,
          handle: draft.draft,
          confirm: (pin) => call("draft.confirm", pin === undefined ? { draft: draft.draft } : { draft: draft.draft, pin }),
          cancel: () => call("draft.cancel", { draft: draft.draft }).then(none),
        };
      },
      query: (pending) => call("pending.query", { pending: pending.pending }),
    } : undefined;
    this.aiStudio = modules.aiStudio ? {
      grants: () => this.observe("studio.grants"),
      requestGrant: (roomID, scope) => call("studio.requestGrant", { roomID, scope }),
      summarize: (grant) => call("studio.summarize", { grant: grant.grant }),
      revoke: (grant) => call("studio.revoke", { grant: grant.grant }).then(none),
    } : undefined;
    this.directory = modules.directory ? {
      member: (userID) => call("directory.member", { userID }),
      refreshOwnProfile: () => call("directory.refreshOwnProfile"),
      assignRole: (role, userID) => call("directory.assignRole", { role, userID }).then((r) => r.changed),
      removeRole: (role, userID) => call("directory.removeRole", { role, userID }).then((r) => r.changed),
      members: async (options = {}) => this._search(await call("directory.searchMembers", options)),
      users: async (options = {}) => this._search(await call("directory.searchUsers", options)),
    } : undefined;
    this.push = this._push();
    this.encryption = {
      identity: () => this.observe("encryption.identity"),
      backup: () => this.observe("encryption.backup"),
      identityState: () => call("encryption.identityState"),
      setUpRecovery: (passphrase) => call("encryption.recovery.setUp", { passphrase }).then((r) => r.recoveryKey),
      restoreRecovery: (recoveryKey, isPassphrase) =>
        call("encryption.recovery.restore", { recoveryKey, isPassphrase }).then((r) => r.backup),
      resetRecovery: (password, passphrase) =>
        call("encryption.recovery.reset", { password, passphrase }).then((r) => r.recoveryKey),
      backupStatus: () => call("encryption.backup.status"),
      checkBackup: () => call("encryption.backup.check"),
      createBackup: () => call("encryption.backup.create").then((r) => r.version),
      enableBackup: (privateKey) => call("encryption.backup.enable", { privateKey }).then((r) => r.version),
      restoreBackup: () => call("encryption.backup.restore"),
      deleteBackup: () => call("encryption.backup.delete").then(none),
      devices: (userID) => call("encryption.devices", { userID }),
      identityChanged: (userID) => call("encryption.identityChanged", { userID }).then((r) => r.changed),
      acknowledgeIdentityChange: (userID) =>
        call("encryption.acknowledgeIdentityChange", { userID }).then((r) => r.acknowledged),
      verify: (userID, options = {}) =>
        call("verification.start", { userID, ...options }).then((info) => this._verification(info)),
      incomingVerification: () => this.observe("verification.incoming"),
      verification: (info) => this._verification(info),
    };
    this.publicRooms = {
      search: async (options = {}) => this._search(await call("publicRooms.search", options)),
      resolve: (alias) => call("publicRooms.resolve", { alias }).then((r) => r.roomID),
      join: (roomIDOrAlias) => call("publicRooms.join", { roomIDOrAlias }).then((r) => r.roomID),
      isPublished: (roomID) => call("publicRooms.isPublished", { roomID }).then((r) => r.published),
      setPublished: (roomID, published) => call("publicRooms.setPublished", { roomID, published }).then(none),
    };
  }

  _push() {
    const call = (method, params) => this.request(method, params);
    const none = async () => {};
    return {
      counts: () => this.observe("push.counts"),
      gateway: () => call("push.gateway"),
      setPusher: (options) => call("push.setPusher", options),
      pushers: () => call("push.pushers"),
      pusherState: () => call("push.pusherState"),
      removePusher: () => call("push.removePusher").then(none),
      rules: () => call("push.rules"),
      addKeyword: (keyword) => call("push.addKeyword", { keyword }).then(none),
      removeKeyword: (keyword) => call("push.removeKeyword", { keyword }).then(none),
      setRuleEnabled: (kind, ruleID, enabled) => call("push.setRuleEnabled", { kind, ruleID, enabled }).then(none),
      event: (roomID, eventID) => call("push.event", { roomID, eventID }),
    };
  }

  _search(opened) {
    const search = opened.search;
    const call = (method, params = {}) => this.request(method, { search, ...params });
    const none = async () => {};
    return {
      handle: search,
      results: () => this.observe("search.results", { search }),
      search: (term = "") => call("search.run", { term }),
      update: (term) => call("search.update", { term }).then(none),
      loadMore: () => call("search.loadMore"),
      refresh: () => call("search.refresh").then(none),
      clear: () => call("search.clear").then(none),
    };
  }

  _hierarchy(info) {
    const hierarchy = info.hierarchy;
    return {
      ...info,
      state: () => this.observe("hierarchy.state", { hierarchy }),
      loadNextPage: () => this.request("hierarchy.loadNextPage", { hierarchy }),
    };
  }

  _verification(info) {
    const verification = info.verification;
    const call = (method) => this.request(method, { verification }).then(() => {});
    return {
      handle: verification,
      transactionID: info.transactionID,
      otherUserID: info.otherUserID,
      state: () => this.observe("verification.state", { verification }),
      accept: () => call("verification.accept"),
      startSAS: () => call("verification.startSAS"),
      confirm: () => call("verification.confirm"),
      mismatch: () => call("verification.mismatch"),
      cancel: () => call("verification.cancel"),
    };
  }

  _conversation(opened) {
    const conversation = opened.conversation;
    const call = (method, params = {}) => this.request(method, { conversation, ...params });
    const none = async () => {};
    return {
      id: opened.roomID,
      handle: conversation,
      timeline: () => this.observe("conversation.timeline", { conversation }),
      pagination: () => this.observe("conversation.pagination", { conversation }),
      send: (text, options = {}) => call("chat.conversation.send", { text, ...options }),
      edit: (eventID, text) => call("chat.conversation.edit", { eventID, text }),
      paginateBackwards: (count) => call("chat.conversation.paginateBackwards", count ? { count } : {}),
      react: (eventID, key) => call("chat.conversation.react", { eventID, key }).then(none),
      redact: (eventID) => call("chat.conversation.redact", { eventID }).then(none),
      markRead: (eventID) => call("chat.conversation.markRead", eventID ? { eventID } : {}).then(none),
      sendAttachment: (path, contentType, options = {}) =>
        call("chat.conversation.sendAttachment", { path, contentType, ...options }),
      uploads: () => this.observe("conversation.uploads", { conversation }),
      resend: (transactionID) => call("chat.conversation.resend", { transactionID }).then(none),
      cancelSend: (transactionID) => call("chat.conversation.cancelSend", { transactionID }).then(none),
      download: (eventID, path, options = {}) =>
        call("chat.conversation.download", { eventID, path, ...options }).then((answer) => answer.size),
      encryption: () => this.observe("conversation.encryption", { conversation }),
      enableEncryption: () => call("chat.conversation.enableEncryption").then(none),
    };
  }
}

module.exports = { Client, SymorvaError, SchemaViolation };
