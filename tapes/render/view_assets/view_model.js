// tapes view's model: the page carries each session's frames as the cassette stores them (v2
// msgpack arrays, base64 in script elements that run nothing); this decodes them and makes the
// rows, as columns, and the marks that tie them together the way the replay engine does: a
// cancellation and the response it raced, a server→client request and the client's answer,
// progress and the request it reports on, a stream the client dropped and the GET that resumed it
// from its last event id, a task's polls and the request that created the task (2025-11-25), a
// subscription's events and its subscriptions/listen request (2026-07-28). One pass, keeping
// small state per request: a million frames take a few seconds, and the page keeps their bytes,
// decoding a frame again only to show or search it.
// view.js draws what this makes; tests run it under Node (module.exports) to read a page's model.
"use strict";
const tapesModel = (() => {
  // A row's type picks its arrow's colour and style; k is its index times two, plus one for server→client.
  const TYPES = ["request", "notification", "result", "error", "batch", "invalid",
    "raw", "stderr", "http", "end", "sse", "exit"];
  const TYPE_CODE = new Map(TYPES.map((name, index) => [name, index]));
  // store.py's KIND_CODES and DIRECTION_CODES: a v2 frame's kind and direction by number.
  const KINDS = ["message", "raw", "stderr", "http_request", "http_response", "sse_event", "stream_end", "exit"];
  const SUMMARY_LIMIT = 100; // characters of a payload summary shown on a row
  const DETAIL_LIMIT = 64000; // characters of one frame's JSON shown in the details panel; the rest is cut
  const CHUNK = 4096; // rows per chunk of search text, built on the first search
  const STDIO = "stdio";
  const SESSION_HEADER = "mcp-session-id";
  const LEGACY_SESSION_PARAMETERS = ["sessionId", "session_id"];
  const LONG_LIVED_METHODS = new Set(["subscriptions/listen"]);
  const SUBSCRIPTION_ID_KEY = "io.modelcontextprotocol/subscriptionId";
  const STATELESS_VERSION_KEY = "io.modelcontextprotocol/protocolVersion";
  const POLL_METHODS = new Set(["tasks/get"]);
  const TASK_PARAM = "taskId";
  const TASK_STATUS = "notifications/tasks/status";
  const STREAM_ENDS = new Map([["client_disconnect", "client disconnected"], ["upstream_error", "upstream error"]]);

  // The marks that tie rows together: name -> [kind, text, explanation]. A mark is [row, its
  // number here, linked seq or null, ...args]; {0}, {1}... are the args and {t} the linked seq.
  const MARKS = {
    "progress": ["progress", "progress ×{0}", "{0} progress notifications report on this request"],
    "progress of": ["of", "of #{0}", "progress of request #{0}"],
    "late": ["late", "after cancel", "the server reported progress after the client had cancelled the request"],
    "events": ["progress", "events ×{0}", "{0} notifications came on this subscription's stream"],
    "event of": ["of", "on #{0}", "sent on the stream of subscriptions/listen #{0}"],
    "closed": ["cancel", "server closed", "the server ended subscription #{0} (frame {t})"],
    "cancels": ["cancel", "✕ cancels #{0}", "the client cancels request #{0} (frame {t})"],
    "cancelled": ["cancel", "✕ cancelled", "the client cancelled this request (frame {t})"],
    "no response": ["race", "no response", "the server never answered the cancelled request"],
    "never answered": ["race", "never answered", "no response to this request was recorded"],
    "too late": ["race", "⚡ too late: answered", "the response (frame {t}) was already sent: the response won the race"],
    "still came": ["race", "⚡ response still came", "the server answered anyway (frame {t}): the race the cancel lost"],
    "after cancel": ["race", "⚡ after cancel", "sent after the client cancelled (frame {t})"],
    "raced": ["race", "⚡ raced a cancel", "the client's cancel (frame {t}) came after it"],
    "answers": ["answer", "↪ answers server #{0}", "the client's answer to the server's request (frame {t})"],
    "answered": ["answer", "↩ answered at {t}", "the client answered this request in frame {t}"],
    "for": ["of", "for #{0}", "sent while serving request #{0} (frame {t})"],
    "poll": ["poll", "poll {0} of task", "{1} about task {2}, created by the request in frame {t}"],
    "about task": ["poll", "{0} of task", "{1} about task {2}, created by the request in frame {t}"],
    "polled": ["poll", "polled ×{0}", "task {1} was polled {0} times"],
    "retry": ["retry", "retry {0} ms", "the server tells the client when to reconnect"],
    "cut": ["cut", "✂ stream cut", "the stream broke: {0}"],
    "resume": ["resume", "⟲ resumes {0} after {1}", "the client resumes {0} after its event {2}"],
    "resume unseen": ["resume", "⟲ Last-Event-ID {0}", "resumes after an event id this recording never saw"],
    "resumed": ["resumed", "⟲ resumed by {0}", "the client resumed this stream with {0}"],
  };
  const MARK_LIST = Object.values(MARKS);
  const MARK_NUMBER = new Map(Object.keys(MARKS).map((name, number) => [name, number]));

  // --- msgpack ----------------------------------------------------------------------------------
  // A reader of the msgpack a cassette holds (the loader in Python has checked every frame).
  // Maps become objects; a "__proto__" key in a message is made an own property like any other
  // (the npm msgpack decoder refuses the whole input for one); integers past 2^53 become BigInts.
  // Only the members JSON-RPC names are looked up (`in`, `.`), none of them Object.prototype's.

  const utf8 = new TextDecoder();
  const keys = new Map(); // Reader.key's cache: a hash of a key's bytes -> the key

  // Whether the ASCII string `key` (only those are cached) is the bytes at `start`.
  function sameBytes(key, bytes, start) {
    for (let i = 0; i < key.length; i++) if (key.charCodeAt(i) !== bytes[start + i]) return false;
    return true;
  }
  const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);
  const MIN_SAFE = -MAX_SAFE;

  class Reader {
    constructor(bytes) {
      this.bytes = bytes;
      this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
      this.at = 0;
      this.odd = false;
    }

    value() {
      const bytes = this.bytes;
      const head = bytes[this.at++];
      if (head < 0x80) return head;
      if (head < 0x90) return this.map(head & 0x0f);
      if (head < 0xa0) return this.array(head & 0x0f);
      if (head < 0xc0) return this.str(head & 0x1f);
      if (head >= 0xe0) return head - 0x100;
      const view = this.view;
      const at = this.at;
      switch (head) {
        case 0xc0: return null;
        case 0xc2: return false;
        case 0xc3: return true;
        case 0xc4: return this.bin(this.skip(1, bytes[at]));
        case 0xc5: return this.bin(this.skip(2, view.getUint16(at)));
        case 0xc6: return this.bin(this.skip(4, view.getUint32(at)));
        case 0xca: return this.skip(4, this.finite(view.getFloat32(at)));
        case 0xcb: return this.skip(8, this.finite(view.getFloat64(at)));
        case 0xcc: return this.skip(1, bytes[at]);
        case 0xcd: return this.skip(2, view.getUint16(at));
        case 0xce: return this.skip(4, view.getUint32(at));
        case 0xcf: return this.skip(8, this.wide(view.getBigUint64(at)));
        case 0xd0: return this.skip(1, view.getInt8(at));
        case 0xd1: return this.skip(2, view.getInt16(at));
        case 0xd2: return this.skip(4, view.getInt32(at));
        case 0xd3: return this.skip(8, this.wide(view.getBigInt64(at)));
        case 0xd9: return this.str(this.skip(1, bytes[at]));
        case 0xda: return this.str(this.skip(2, view.getUint16(at)));
        case 0xdb: return this.str(this.skip(4, view.getUint32(at)));
        case 0xdc: return this.array(this.skip(2, view.getUint16(at)));
        case 0xdd: return this.array(this.skip(4, view.getUint32(at)));
        case 0xde: return this.map(this.skip(2, view.getUint16(at)));
        case 0xdf: return this.map(this.skip(4, view.getUint32(at)));
        default: throw new Error(`byte ${this.at - 1} starts no value a cassette holds`);
      }
    }

    skip(count, value) {
      this.at += count;
      return value;
    }

    // Values plain JSON has no form for (see `plainReplacer`) are noted in `odd`.
    finite(value) {
      if (!Number.isFinite(value)) this.odd = true;
      return value;
    }

    wide(value) {
      if (value <= MAX_SAFE && value >= MIN_SAFE) return Number(value);
      this.odd = true;
      return value;
    }

    str(length) {
      const start = this.at;
      const end = (this.at += length);
      if (end > this.bytes.length) throw new Error(`a string at byte ${start} runs past the end`);
      if (length < 24) { // short ASCII, the common key or method, without TextDecoder's call
        let text = "";
        for (let i = start; i < end; i++) {
          const code = this.bytes[i];
          if (code > 0x7f) return utf8.decode(this.bytes.subarray(start, end));
          text += String.fromCharCode(code);
        }
        return text;
      }
      return utf8.decode(this.bytes.subarray(start, end));
    }

    // A map key: short ones (JSON-RPC's member names, mostly) come from a cache, so that each is
    // one string the engine has seen before rather than a new one to hash on every object.
    key() {
      const bytes = this.bytes;
      const head = bytes[this.at];
      if (head < 0xa0 || head > 0xaf) return this.value(); // not a string of up to 15 bytes
      const start = this.at + 1;
      const end = start + (head & 0x0f);
      let hash = head;
      for (let i = start; i < end; i++) hash = (hash * 31 + bytes[i]) | 0;
      const known = keys.get(hash);
      if (known !== undefined && known.length === end - start && sameBytes(known, bytes, start)) {
        this.at = end;
        return known;
      }
      const key = this.value();
      if (key.length === end - start && keys.size < 4096) keys.set(hash, key); // ASCII only: compared byte for char
      return key;
    }

    bin(length) {
      this.odd = true;
      const start = this.at;
      this.at += length;
      return this.bytes.slice(start, this.at);
    }

    array(length) {
      const array = new Array(length);
      for (let i = 0; i < length; i++) array[i] = this.value();
      return array;
    }

    map(length) {
      const map = {};
      for (let i = 0; i < length; i++) {
        const raw = this.key();
        const key = typeof raw === "string" ? raw : raw instanceof Uint8Array ? bytesText(raw) : String(raw);
        if (key === "__proto__") Object.defineProperty(map, key, { value: this.value(), enumerable: true, writable: true, configurable: true });
        else map[key] = this.value();
      }
      return map;
    }
  }

  function base64Of(bytes) {
    let text = "";
    for (let i = 0; i < bytes.length; i += 0x8000) text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
    return btoa(text);
  }

  const bytesText = (bytes) => `<${bytes.length} bytes: ${base64Of(bytes)}>`;

  function bytesOf(base64Texts) {
    const parts = base64Texts.map((text) => {
      if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(text); // newer browsers: in C++
      const binary = atob(text);
      const part = new Uint8Array(binary.length);
      for (let i = 0; i < binary.length; i++) part[i] = binary.charCodeAt(i);
      return part;
    });
    const all = new Uint8Array(parts.reduce((size, part) => size + part.length, 0));
    let at = 0;
    for (const part of parts) {
      all.set(part, at);
      at += part.length;
    }
    return all;
  }

  // --- values as the page shows them ------------------------------------------------------------

  const isMap = (value) => value !== null && typeof value === "object" && !Array.isArray(value) && !(value instanceof Uint8Array);
  const isInt = (value) => Number.isInteger(value) || typeof value === "bigint";

  // A value as plain JSON: bytes as text naming their size and base64, integers past 2^53 exact
  // where the browser can (JSON.rawJSON), the non-finite numbers as text.
  function plainReplacer(key, value) {
    if (typeof value === "bigint") return typeof JSON.rawJSON === "function" ? JSON.rawJSON(String(value)) : String(value);
    if (typeof value === "number" && !Number.isFinite(value)) return Number.isNaN(value) ? "nan" : value > 0 ? "inf" : "-inf";
    if (value instanceof Uint8Array) return bytesText(value);
    return value;
  }

  const json = (value) => JSON.stringify(value, plainReplacer);

  class Full extends Error {}

  // Compact one-line JSON of a value, cut at about `limit` characters: stops walking once there.
  function compact(value, limit) {
    if (isInt(value)) return String(value);
    if (typeof value === "string" && value.length <= limit) return JSON.stringify(value);
    const parts = [];
    let size = 0;
    const emit = (text) => {
      parts.push(text);
      size += text.length;
      if (size > limit) throw new Full();
    };
    const walk = (item) => {
      if (Array.isArray(item)) {
        emit("[");
        item.forEach((member, index) => {
          if (index) emit(",");
          walk(member);
        });
        emit("]");
      } else if (isMap(item)) {
        emit("{");
        Object.keys(item).forEach((key, index) => {
          emit((index ? "," : "") + JSON.stringify(key.slice(0, limit + 1)) + ":");
          walk(item[key]);
        });
        emit("}");
      } else {
        emit(scalar(item, limit));
      }
    };
    try {
      walk(value);
    } catch (error) {
      if (!(error instanceof Full)) throw error;
    }
    return parts.join("");
  }

  function scalar(value, limit) {
    if (typeof value === "string") return JSON.stringify(value.slice(0, limit + 1));
    if (value instanceof Uint8Array) return `<${value.length} bytes>`;
    if (typeof value === "number" && !Number.isFinite(value)) return Number.isNaN(value) ? "NaN" : value > 0 ? "Infinity" : "-Infinity";
    return String(value);
  }

  function text(value, limit) {
    if (typeof value === "string") return value.slice(0, limit);
    if ((typeof value === "number" && Number.isFinite(value)) || typeof value === "bigint") return String(value).slice(0, limit);
    return compact(value, limit);
  }

  const idText = (id) => (isInt(id) ? String(id) : compact(id, 40));

  // --- JSON-RPC ---------------------------------------------------------------------------------

  function classifySingle(message) {
    if (!isMap(message) || message.jsonrpc !== "2.0") return "invalid";
    if ("method" in message) {
      if (typeof message.method !== "string") return "invalid";
      return "id" in message ? "request" : "notification";
    }
    if (!("id" in message)) return "invalid";
    if ("result" in message) return "result";
    return isMap(message.error) ? "error" : "invalid";
  }

  function classify(message) {
    if (Array.isArray(message)) {
      return message.length && message.every((item) => classifySingle(item) !== "invalid") ? "batch" : "invalid";
    }
    return classifySingle(message);
  }

  const itemsOf = (message) => (Array.isArray(message) ? message : [message]);
  const paramsOf = (message) => (isMap(message.params) ? message.params : {});

  function messageWhat(message, kind) {
    switch (kind) {
      case "request": return `request ${message.method} #${idText(message.id)}`;
      case "notification": return `notification ${message.method}`;
      case "result": return `result #${idText(message.id)}`;
      case "error": return `error #${idText(message.id)} ${compact(message.error.code, 20)}`;
      case "batch": return `batch [${message.length}]`;
      default: return "invalid JSON-RPC";
    }
  }

  // [type, what] of a JSON-RPC message; the page works out its summary from the frame when shown.
  function messageLabel(message) {
    const kind = classify(message);
    if (kind === "notification") {
      if (message.method !== "notifications/progress") return [kind, message.method];
      const params = paramsOf(message);
      const total = "total" in params ? `/${text(params.total, 12)}` : "";
      return [kind, `progress ${text(params.progress ?? null, 12)}${total}`];
    }
    return [kind, messageWhat(message, kind)];
  }

  // A JSON-RPC id as a Map key: 1 and "1" are different ids, 1 and 1.0 are not (the replay index
  // ties them the same way). Ids JSON-RPC does not allow are null.
  function keyOf(id) {
    if (typeof id === "string") return "s" + id;
    if ((typeof id === "number" && !Number.isNaN(id)) || typeof id === "bigint") return "n" + String(id);
    return null;
  }

  // The JSON-RPC ids a row answers to in the filter box, space-separated: its messages' ids, and
  // the request a cancellation or a progress notification refers to.
  function idsOf(message) {
    const found = [];
    for (const item of itemsOf(message)) {
      if (!isMap(item)) continue;
      const params = item.params;
      const values = isMap(params) ? [item.id, params.requestId, params.progressToken] : [item.id];
      for (const value of values) {
        if (Number.isInteger(value) || typeof value === "bigint" || typeof value === "string") {
          found.push(String(value).replaceAll(" ", "\u00a0"));
        }
      }
    }
    return found.join(" ");
  }

  function header(headers, name) {
    if (!Array.isArray(headers)) return null;
    const lowered = name.toLowerCase();
    for (const pair of headers) {
      if (Array.isArray(pair) && typeof pair[0] === "string" && pair[0].toLowerCase() === lowered) return pair[1];
    }
    return null;
  }

  function legacySessionId(url) {
    let query;
    try {
      query = new URL(url, "http://host").searchParams;
    } catch {
      return null;
    }
    for (const name of LEGACY_SESSION_PARAMETERS) {
      const value = query.get(name);
      if (value) return value;
    }
    return null;
  }

  // --- frames -----------------------------------------------------------------------------------

  // Decodes a session's frames one by one: [seq, t, fromClient, channel, kind, message, data, info].
  class Frames {
    constructor(bytes) {
      this.reader = new Reader(bytes);
      this.channels = [];
    }

    next() {
      const record = this.reader.value();
      // Numbers as the loader takes them: 1.0 or true stand for 1 there too.
      const channel = typeof record[3] === "string" ? (this.channels.push(record[3]), record[3]) : this.channels[Number(record[3])];
      const info = record[7];
      return {
        // a seq past 2^53 (a BigInt), or a time stored as a wide integer, as near as a number holds it
        seq: Number(record[0]), t: Number(record[1]), fromClient: Number(record[2]) === 0, channel, kind: KINDS[Number(record[4])],
        message: record[5] === undefined ? null : record[5], data: record[6] === undefined ? null : record[6],
        info: info === undefined ? null : info, partial: isMap(info) && Boolean(info.partial),
      };
    }
  }

  // A frame at a byte offset, decoded again (for the details panel and the search).
  // Whether its message or info holds a value plain JSON has no form for (`odd`): only then is its
  // JSON made with the (slower) replacer.
  function frameAt(bytes, offset) {
    const reader = new Reader(bytes);
    reader.at = offset;
    const size = bytes[reader.at++] & 0x0f; // a record is a fixarray of 5 to 8 fields
    for (let field = 0; field < 5; field++) reader.value();
    const message = size > 5 ? reader.value() : null;
    const odd = reader.odd;
    const data = size > 6 ? reader.value() : null;
    reader.odd = false;
    const info = size > 7 ? reader.value() : null;
    return { message, data, info, odd: odd || reader.odd };
  }

  function dataText(data) {
    try {
      return new TextDecoder("utf-8", { fatal: true }).decode(data);
    } catch {
      return null;
    }
  }

  // The frame's JSON for the details panel: {message, data or "data (base64)", info} as decoded
  // (show it with jsonText), or when its JSON is longer than DETAIL_LIMIT characters that JSON cut.
  function bodyOf(frame) {
    const body = {};
    if (frame.message !== null) body.message = frame.message;
    if (frame.data !== null) {
      const decoded = dataText(frame.data);
      if (decoded === null) body["data (base64)"] = base64Of(frame.data);
      else body.data = decoded;
    }
    if (frame.info !== null) body.info = frame.info;
    const line = frame.odd ? json(body) : JSON.stringify(body);
    if (line.length <= DETAIL_LIMIT) return { body, line };
    const cut = `${line.slice(0, DETAIL_LIMIT)}… (${line.length - DETAIL_LIMIT} more characters; \`tapes export\` has them all)`;
    return { body: cut, line: JSON.stringify(cut) };
  }

  const jsonText = (value, indent) => JSON.stringify(value, plainReplacer, indent);

  // --- the links between frames -------------------------------------------------------------

  class Interaction {
    constructor(group, row, seq, requestId, longLived) {
      this.group = group;
      this.row = row;
      this.seq = seq;
      this.requestId = idText(requestId);
      this.longLived = longLived;
      this.response = null; // [row, seq] of the server's response
      this.cancel = null; // ... of the client's first cancel of it
      this.progress = null; // [count, seq of the first] of its progress notifications
      this.events = null; // the same for what its subscriptions/listen stream carried
      this.serverRequests = null; // Map: server→client requests sent for it
      this.idKey = null;
      this.token = null;
      this.pendingIn = null; // the session it awaits a response in
    }
  }

  // What the links need of one session: request ids are only unique within it.
  class Session {
    constructor() {
      this.openById = new Map(); // awaiting a response
      this.byId = new Map(); // the latest request with the id (a cancel may race its answer)
      this.byToken = new Map();
      this.byServerRequest = new Map();
      this.pending = []; // open requests, oldest first; one answered is dropped when it reaches the top
      this.onChannel = new Map(); // HTTP: the last request an exchange carried
      this.unanswered = new Map(); // (sent by the client, id) -> [row, seq], for tasks
      this.tasks = new Map(); // (run by the client, task id) -> task
    }

    newestPending() {
      const pending = this.pending;
      while (pending.length && pending[pending.length - 1].pendingIn !== this) pending.pop();
      return pending.length ? pending[pending.length - 1] : null;
    }
  }

  const sideKey = (fromClient, key) => (fromClient ? "c" : "s") + (key === null ? "" : key);

  // One session's page model, built in one pass over its frames.
  class Diagram {
    constructor(count, notes) {
      this.n = count;
      this.seq = new Float64Array(count);
      this.t = new Float64Array(count);
      this.k = new Uint8Array(count);
      this.ch = new Int32Array(count);
      this.g = new Int32Array(count).fill(-1);
      this.offsets = new Float64Array(count + 1);
      this.what = new Array(count);
      this.sum = new Array(count).fill("");
      this.ids = new Array(count).fill("");
      this.eids = new Map(); // row -> SSE event id
      this.notes = new Map(); // row -> differences noted on it
      this.notesBySeq = new Map(notes);
      this.groups = []; // each interaction's request row, or its label
      this.marks = []; // [row, mark number, linked seq or null, ...args]
      this.channels = [];
      this.channelByName = new Map();
      this.previous = null; // the channel of the row before, if it was a POST's head
      this.protocol = { version: null, initializeIds: new Set() };
      // the links' state
      this.interactions = 0;
      this.sessions = new Map();
      this.unsettled = new Map(); // channels whose session is not known yet -> their interactions
      this.lastEvent = new Map(); // SSE event id -> [row, seq, channel] carrying it last
      this.resumed = new Map(); // channel -> [origin row, resuming channel, its seq]
      this.ends = new Map(); // channel -> the row of its stream end
      this.watched = []; // interactions with marks to write at the end (counts, cancels)
    }

    mark(row, name, target, ...args) {
      this.marks.push([row, MARK_NUMBER.get(name), target, ...args]);
    }

    build(frames) {
      for (let row = 0; row < this.n; row++) {
        this.offsets[row] = frames.reader.at;
        this.add(frames.next(), row);
      }
      this.offsets[this.n] = frames.reader.at;
      this.finish();
    }

    add(frame, row) {
      let channel = this.channelByName.get(frame.channel);
      if (channel === undefined) {
        channel = {
          name: frame.channel, index: this.channels.length, label: "", first: row, last: row, req: null, res: null, end: null, g: null,
          method: "", resumes: false, legacy: false, session: null,
        };
        this.channelByName.set(frame.channel, channel);
        this.channels.push(channel);
      }
      channel.last = row;
      this.watchVersion(frame);
      const post = this.previous;
      this.previous = null;
      const message = frame.message;
      let type;
      let what;
      if (frame.kind === "message") {
        [type, what] = messageLabel(message);
      } else {
        let summary;
        [what, summary, type] = this.label(frame, channel, row);
        if (message === null) this.sum[row] = summary; // an SSE event carrying a message: summarised as one
      }
      if (frame.partial) what += " (partial)";
      if (post === channel && frame.fromClient && message !== null) { // a POST's body names it
        const space = what.indexOf(" ");
        channel.label = `${channel.name} POST ${space < 0 ? what : what.slice(space + 1)}`;
      }
      this.seq[row] = frame.seq;
      this.t[row] = frame.t;
      this.k[row] = TYPE_CODE.get(type) * 2 + (frame.fromClient ? 0 : 1);
      this.ch[row] = channel.index;
      this.what[row] = what;
      if (message !== null) {
        this.ids[row] = idsOf(message);
        this.g[row] = this.see(frame, row, channel, type);
      }
      const notes = this.notesBySeq.get(frame.seq);
      if (notes) this.notes.set(row, [...(this.notes.get(row) || []), ...notes]);
    }

    // The version the session negotiated, as Cassette.protocol_version works it out.
    watchVersion(frame) {
      const watch = this.protocol;
      const message = frame.message;
      if (watch.version !== null || !isMap(message)) return;
      if (frame.fromClient) {
        const method = message.method;
        if (method === "initialize" && "id" in message) watch.initializeIds.add(keyOf(message.id) ?? json(message.id));
        else if (method !== "server/discover" && "id" in message) {
          const params = message.params;
          const meta = isMap(params) ? params._meta : null;
          const version = isMap(meta) ? meta[STATELESS_VERSION_KEY] : null;
          watch.version = typeof version === "string" ? version : null;
        }
      } else if ("result" in message && watch.initializeIds.has(keyOf(message.id) ?? json(message.id))) {
        const version = isMap(message.result) ? message.result.protocolVersion : null;
        watch.version = typeof version === "string" ? version : null;
      }
    }

    // [what, summary, type] of a frame that is not a plain message, noting on the way what its
    // channel is and the streams' links.
    label(frame, channel, row) {
      const info = isMap(frame.info) ? frame.info : {};
      switch (frame.kind) {
        case "http_request": {
          if (channel.req === null) {
            channel.req = row;
            const method = (channel.method = typeof info.method === "string" ? info.method : "?");
            if (method === "POST") this.previous = channel;
            else if (method !== "GET") channel.label = `${channel.name} ${text(method, 12)}`;
          }
          this.httpRequest(frame, channel, row);
          return [`${text(info.method ?? null, 20)} ${text(info.path ?? null, 80)}`, "", "http"];
        }
        case "http_response": {
          if (channel.res === null) channel.res = row;
          this.sessionFound(channel, header(info.headers, SESSION_HEADER));
          const contentType = header(info.headers, "content-type") || "";
          return [`HTTP ${compact(info.status ?? null, 10)} ${text(contentType, 40)}`.trimEnd(), "", "http"];
        }
        case "stream_end": {
          const reason = "reason" in info ? info.reason : null;
          channel.end = "reason" in info ? (typeof reason === "string" ? reason : json(reason)) : "closed";
          this.streamEnd(frame, row);
          const what = STREAM_ENDS.get(reason) ?? `stream end (${compact(reason, 30)})`;
          const detail = "detail" in info ? info.detail : null;
          return [what, detail === null ? "" : text(detail, SUMMARY_LIMIT), "end"];
        }
        case "sse_event": {
          const eventId = "id" in info ? info.id : null;
          if (eventId !== null) this.eids.set(row, text(eventId, 200));
          if (info.event === "endpoint") {
            channel.legacy = true;
            this.sessionFound(channel, legacySessionId(frame.data === null ? "" : utf8.decode(frame.data)));
          }
          this.sseEvent(frame, row);
          if (frame.message === null) {
            const data = frame.data === null ? "" : utf8.decode(frame.data);
            if (!data && eventId !== null) return ["sse priming", "", "sse"];
            const event = info.event ?? null;
            return [`sse ${event ? text(event, 30) : "event"}`, data.slice(0, SUMMARY_LIMIT), "sse"];
          }
          const [type, what] = messageLabel(frame.message);
          return [what, "", type];
        }
        case "exit":
          return ["exit", Object.keys(info).map((key) => `${key}=${compact(info[key], 20)}`).join(" "), "exit"];
        case "raw":
          return [`raw ${frame.data === null ? 0 : frame.data.length} B`, "", "raw"];
        default: // a stderr line: the page summarises it from its bytes
          return [frame.kind, "", frame.kind];
      }
    }

    session(channel) {
      let found = this.sessions.get(channel.session);
      if (found === undefined) this.sessions.set(channel.session, (found = new Session()));
      return found;
    }

    // `channel` belongs to `sessionId` (an HTTP head or an endpoint named it). What it carried
    // before its session was known (an initialize POST's request) moves there.
    sessionFound(channel, sessionId) {
      if (typeof sessionId !== "string" || channel.session !== null || channel.name === STDIO) return;
      const old = this.session(channel);
      channel.session = sessionId;
      const now = this.session(channel);
      for (const interaction of this.unsettled.get(channel.name) || []) {
        for (const [table, key] of [["openById", interaction.idKey], ["byId", interaction.idKey], ["byToken", interaction.token]]) {
          if (key !== null && old[table].get(key) === interaction) {
            now[table].set(key, interaction);
            old[table].delete(key);
          }
        }
        if (interaction.pendingIn === old) {
          interaction.pendingIn = now;
          now.pending.push(interaction);
        }
        if (old.onChannel.get(channel.name) === interaction) {
          now.onChannel.set(channel.name, interaction);
          old.onChannel.delete(channel.name);
        }
      }
      this.unsettled.delete(channel.name);
    }

    httpRequest(frame, channel, row) {
      const info = isMap(frame.info) ? frame.info : {};
      this.sessionFound(channel, header(info.headers, SESSION_HEADER));
      this.sessionFound(channel, typeof info.path === "string" ? legacySessionId(info.path) : null);
      const resumedFrom = header(info.headers, "last-event-id");
      if (typeof resumedFrom !== "string") return;
      channel.resumes = true;
      const origin = this.lastEvent.get(text(resumedFrom, 200));
      if (origin === undefined) {
        this.mark(row, "resume unseen", null, resumedFrom.slice(0, 40));
        return;
      }
      const [originRow, originSeq, originChannel] = origin;
      this.mark(row, "resume", originSeq, originChannel, resumedFrom.slice(0, 40), resumedFrom);
      const end = this.ends.get(originChannel);
      if (end !== undefined && end >= originRow) this.mark(end, "resumed", frame.seq, frame.channel);
      else this.resumed.set(originChannel, [originRow, frame.channel, frame.seq]); // the mark goes on its end, or on the event
    }

    sseEvent(frame, row) {
      const info = isMap(frame.info) ? frame.info : {};
      if ("retry" in info && info.retry !== null) this.mark(row, "retry", null, compact(info.retry, 12));
      if ("id" in info && info.id !== null) this.lastEvent.set(text(info.id, 200), [row, frame.seq, frame.channel]);
    }

    streamEnd(frame, row) {
      const reason = isMap(frame.info) ? frame.info.reason : undefined;
      if (reason === "client_disconnect" || reason === "upstream_error") this.mark(row, "cut", null, reason);
      if (!this.ends.has(frame.channel)) this.ends.set(frame.channel, row);
      const resumed = this.resumed.get(frame.channel);
      if (resumed !== undefined && resumed[0] <= row) {
        this.resumed.delete(frame.channel);
        this.mark(row, "resumed", resumed[2], resumed[1]);
      }
    }

    // Link a frame's message items; the group of the row (its first item's interaction), or -1.
    see(frame, row, channel, type) {
      const session = this.session(channel);
      let group = -1;
      for (const item of itemsOf(frame.message)) {
        if (!isMap(item)) continue;
        const kind = classify(item);
        if (kind === "invalid") continue;
        let owner;
        if (frame.fromClient) {
          owner = this.clientItem(session, frame, row, channel, item, kind);
          if (owner !== null && type === "request" && channel.g === null && channel.name !== STDIO) channel.g = owner.group;
        } else {
          owner = this.serverItem(session, frame, row, channel, item, kind);
        }
        if (owner !== null && group < 0) group = owner.group;
        this.tasks(session, frame, row, item, kind);
      }
      return group;
    }

    clientItem(session, frame, row, channel, item, kind) {
      if (kind === "request") {
        const interaction = new Interaction(this.interactions++, row, frame.seq, item.id, LONG_LIVED_METHODS.has(item.method));
        // a group is named after its request's row; one in a batch is named here
        this.groups.push(isMap(frame.message) && !frame.partial ? row
          : `${text(item.method, 80)} #${interaction.requestId} (frame ${frame.seq})`);
        const key = (interaction.idKey = keyOf(item.id));
        if (key !== null) {
          session.openById.set(key, interaction);
          session.byId.set(key, interaction);
        }
        const params = item.params;
        const meta = isMap(params) ? params._meta : null;
        const token = (interaction.token = isMap(meta) ? keyOf(meta.progressToken) : null);
        if (token !== null) session.byToken.set(token, interaction);
        interaction.pendingIn = session;
        session.pending.push(interaction);
        if (channel.name !== STDIO) {
          session.onChannel.set(channel.name, interaction);
          if (channel.session === null) {
            if (!this.unsettled.has(channel.name)) this.unsettled.set(channel.name, []);
            this.unsettled.get(channel.name).push(interaction);
          }
        }
        return interaction;
      }
      if (kind === "result" || kind === "error") {
        const key = keyOf(item.id);
        const owner = session.byServerRequest.get(key) ?? null;
        const asked = owner && owner.serverRequests ? owner.serverRequests.get(key) : undefined;
        if (asked !== undefined) {
          this.mark(row, "answers", asked[1], compact(item.id, 40));
          this.mark(asked[0], "answered", frame.seq);
        }
        return owner;
      }
      if (item.method !== "notifications/cancelled") return null;
      const params = item.params;
      const target = isMap(params) ? session.byId.get(keyOf(params.requestId)) : undefined;
      if (target === undefined) return null;
      this.mark(row, "cancels", target.seq, target.requestId);
      if (target.response !== null) {
        const [responseRow, responseSeq] = target.response;
        this.mark(row, "too late", responseSeq);
        if (target.cancel === null) this.mark(responseRow, "raced", frame.seq);
      }
      if (target.cancel === null) {
        target.cancel = [row, frame.seq];
        if (target.progress === null && target.events === null) this.watched.push(target);
      }
      return target;
    }

    serverItem(session, frame, row, channel, item, kind) {
      if (kind === "result" || kind === "error") {
        const key = keyOf(item.id);
        // an answer sent again (an event store replaying a resumed stream) answers the same request
        const owner = session.openById.get(key) ?? session.byId.get(key);
        if (owner === undefined) return null;
        session.openById.delete(key);
        if (owner.pendingIn === session) owner.pendingIn = null;
        if (owner.response === null) {
          owner.response = [row, frame.seq];
          if (owner.longLived) this.mark(row, "closed", owner.seq, owner.requestId);
          if (owner.cancel !== null) {
            const [cancelRow, cancelSeq] = owner.cancel;
            this.mark(row, "after cancel", cancelSeq);
            this.mark(cancelRow, "still came", frame.seq);
          }
        }
        return owner;
      }
      if (kind === "request") {
        // On HTTP a server→client request travels on the stream of the request it serves. On
        // stdio nothing says which; the newest pending request is the one the server is busy with.
        let owner = channel.name !== STDIO ? session.onChannel.get(channel.name) ?? null : null;
        if (owner === null) owner = session.newestPending();
        const key = keyOf(item.id);
        session.byServerRequest.set(key, owner);
        if (owner !== null) {
          if (owner.serverRequests === null) owner.serverRequests = new Map();
          if (!owner.serverRequests.has(key)) {
            owner.serverRequests.set(key, [row, frame.seq]);
            this.mark(row, "for", owner.seq, owner.requestId);
          }
        }
        return owner;
      }
      const params = paramsOf(item);
      const meta = params._meta;
      const subscription = isMap(meta) && SUBSCRIPTION_ID_KEY in meta ? meta[SUBSCRIPTION_ID_KEY] : null;
      const listen = subscription !== null ? session.byId.get(keyOf(subscription)) : undefined;
      const method = item.method;
      let owner = null;
      if (listen !== undefined && listen.longLived) owner = listen; // an acknowledgment or event of a subscriptions/listen stream
      else if (method === "notifications/progress") owner = session.byToken.get(keyOf(params.progressToken)) ?? null;
      else if (method === "notifications/cancelled") owner = session.byServerRequest.get(keyOf(params.requestId)) ?? null;
      if (owner === null) return null;
      if (method === "notifications/progress") {
        owner.progress = this.count(owner, owner.progress, frame.seq);
        this.mark(row, "progress of", owner.seq, owner.requestId);
        if (owner.cancel !== null) this.mark(row, "late", owner.cancel[1]);
      } else if (owner.longLived) {
        owner.events = this.count(owner, owner.events, frame.seq);
        this.mark(row, "event of", owner.seq, owner.requestId);
      }
      return owner;
    }

    count(owner, counter, seq) {
      if (counter !== null) {
        counter[0]++;
        return counter;
      }
      if (owner.progress === null && owner.events === null && owner.cancel === null) this.watched.push(owner);
      return [1, seq];
    }

    // Tie each task's polls, status notifications and result request to the request that created
    // it (the one answered with the task): a task is asked about in requests of its own.
    tasks(session, frame, row, item, kind) {
      const fromClient = frame.fromClient;
      if (kind === "request") {
        session.unanswered.set(sideKey(fromClient, keyOf(item.id)), [row, frame.seq]);
      } else if (kind === "result" || kind === "error") {
        const askedKey = sideKey(!fromClient, keyOf(item.id));
        const asked = session.unanswered.get(askedKey);
        session.unanswered.delete(askedKey);
        const result = item.result;
        const task = isMap(result) ? result.task : null;
        const taskId = isMap(task) ? keyOf(task[TASK_PARAM]) : null;
        if (asked !== undefined && taskId !== null) {
          const state = this.task(session, sideKey(!fromClient, taskId));
          if (state.created === null) {
            state.created = asked;
            state.name = compact(task[TASK_PARAM], 12);
            for (const about of state.before) this.markTask(state, ...about);
            state.before = [];
          }
        }
        return;
      }
      const method = item.method;
      if (!method.startsWith("tasks/") && method !== TASK_STATUS) return;
      const taskId = keyOf(paramsOf(item)[TASK_PARAM]);
      if (taskId === null) return;
      // a request goes to the side that runs the task; a status comes from it
      const runsIt = kind === "request" ? fromClient : !fromClient;
      const state = this.task(session, sideKey(runsIt, taskId));
      if (state.created === null) state.before.push([row, frame.seq, method]);
      else this.markTask(state, row, frame.seq, method);
    }

    task(session, key) {
      let state = session.tasks.get(key);
      if (state === undefined) session.tasks.set(key, (state = { created: null, name: "", polls: 0, firstPoll: null, before: [] }));
      return state;
    }

    markTask(state, row, seq, method) {
      const createdSeq = state.created[1];
      if (POLL_METHODS.has(method)) {
        state.polls++;
        if (state.firstPoll === null) state.firstPoll = seq;
        this.mark(row, "poll", createdSeq, state.polls, method, state.name);
      } else {
        this.mark(row, "about task", createdSeq, method.slice(method.lastIndexOf("/") + 1), method, state.name);
      }
    }

    // What is known only at the end: counts on requests, cancels no response followed.
    finish() {
      for (const interaction of this.watched) {
        if (interaction.progress !== null) this.mark(interaction.row, "progress", interaction.progress[1], interaction.progress[0]);
        if (interaction.events !== null) this.mark(interaction.row, "events", interaction.events[1], interaction.events[0]);
        if (interaction.cancel !== null) {
          const [cancelRow, cancelSeq] = interaction.cancel;
          this.mark(interaction.row, "cancelled", cancelSeq);
          if (interaction.response === null) {
            this.mark(cancelRow, "no response", null);
            this.mark(interaction.row, "never answered", null);
          }
        }
      }
      for (const session of this.sessions.values()) {
        for (const state of session.tasks.values()) {
          if (state.created !== null && state.polls) this.mark(state.created[0], "polled", state.firstPoll, state.polls, state.name);
        }
      }
      for (const [originRow, by, seq] of this.resumed.values()) this.mark(originRow, "resumed", seq, by);
      for (const channel of this.channels) {
        if (channel.req !== null && !channel.label) {
          if (channel.method === "GET") {
            channel.label = channel.resumes ? `${channel.name} GET resume`
              : channel.legacy ? `${channel.name} legacy SSE` : `${channel.name} GET stream`;
          } else {
            channel.label = `${channel.name} ${channel.method}`;
          }
        }
        channel.label ||= channel.name;
      }
    }
  }

  // A mark as [kind, text, linked seq or null, explanation].
  function expand([, number, target, ...args]) {
    const [kind, template, explanation] = MARK_LIST[number];
    const fill = (pattern) => pattern.replace(/\{(\d|t)\}/g, (_, key) => String(key === "t" ? target : args[key]));
    return [kind, fill(template), target, fill(explanation)];
  }

  // The model of one side of the page: `data` is its entry in the page's data (title, rows, meta
  // with the protocol and the frame count still to fill, warnings, notes) and `base64` its
  // frames' elements' texts.
  function sideOf(data, base64, index) {
    const bytes = bytesOf(base64);
    const diagram = new Diagram(data.rows, data.notes);
    const frames = new Frames(bytes);
    diagram.build(frames);
    const meta = data.meta.map(([name, value]) => [name, name === "protocol" ? diagram.protocol.version || "unknown"
      : name === "frames" ? String(data.rows) : value]);
    // Marks by row: sorted (stably) so a row's marks are found by binary search, in their order.
    const marks = diagram.marks.sort((a, b) => a[0] - b[0]);
    const side = {
      index, title: data.title, meta, warnings: data.warnings, n: data.rows,
      seq: diagram.seq, t: diagram.t, k: diagram.k, ch: diagram.ch, g: diagram.g, what: diagram.what, sum: diagram.sum,
      ids: diagram.ids, eids: diagram.eids, notes: diagram.notes, groups: diagram.groups, marks,
      markRows: Int32Array.from(marks, (mark) => mark[0]),
      channels: diagram.channels.map(({ name, label, first, last, req, res, end, g }) => ({ name, label, first, last, req, res, end, g })),
      bytes, offsets: diagram.offsets, search: [],
    };
    return side;
  }

  // Row i's frame's JSON for the details panel (see bodyOf).
  const frameBody = (side, i) => bodyOf(frameAt(side.bytes, side.offsets[i])).body;

  // The rows' JSON lines, lowercased, in chunks of CHUNK rows: what a text filter searches. The
  // page makes them while it is idle (`searchChunk`); a search makes what is still missing.
  function searchText(side) {
    for (let c = 0; c * CHUNK < side.n; c++) searchChunk(side, c);
    return side.search;
  }

  // Makes chunk c of the search text, unless it is made; whether there was one to make.
  function searchChunk(side, c) {
    if (c * CHUNK >= side.n) return false;
    if (side.search[c] === undefined) {
      const lines = [];
      for (let i = c * CHUNK; i < Math.min(side.n, (c + 1) * CHUNK); i++) lines.push(bodyOf(frameAt(side.bytes, side.offsets[i])).line);
      side.search[c] = lines.join("\n").toLowerCase();
    }
    return true;
  }

  return { TYPES, SUMMARY_LIMIT, CHUNK, sideOf, frameBody, searchText, searchChunk, expand, classify, messageWhat, compact, jsonText };
})();
if (typeof module === "object" && module.exports) module.exports = tapesModel;
