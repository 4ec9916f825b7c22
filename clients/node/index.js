'use strict';
// coordd from Node.js: the API's services loaded from the .proto files at
// run time (no generated code), and a Session helper that keeps a session
// alive: a heartbeat every ttl/3 on a KeepAlive stream, a broken stream
// resumed with jittered backoff, the holds coordd reports lost, and a
// half-closing close() that releases every hold at once.
//
//   const { loadCoordd, Session } = require('coordd-client');
//   const coord = loadCoordd();
//   const creds = grpc.credentials.createInsecure();
//   const sessions = new coord.SessionService('127.0.0.1:7070', creds);
//   const locks = new coord.LockService('127.0.0.1:7070', creds);
//   const s = await Session.open(sessions, { ttlMs: 10_000 });
//   s.on('lost', (hold) => ...);  // { kind, name, fence, reason }
//   s.on('done', (err) => ...);   // the session is over (err null after close())
//   locks.Lock({ name: 'reports', sessionId: s.id }, ...);
//   await s.close();
//
// The lease is counted on the local clock, conservatively: the answer to a
// heartbeat sent at T with ttl D means the session lives until at least
// T+D. If no answer extends it in time, the session is over ('done').

const path = require('node:path');
const { EventEmitter } = require('node:events');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const PROTO_DIR = path.join(__dirname, '..', '..', 'api', 'proto');
const FILES = ['election', 'idempotency', 'lock', 'queue', 'ratelimit', 'semaphore', 'session'];

// loadCoordd returns the coord.v1 package: a constructor per service
// (new coord.LockService(addr, credentials, options)). The .proto files
// are edition 2023: protobufjs resolves editions since 7.3 (pinned in
// package.json). Field names are lowerCamelCase (sessionId), 64-bit
// integers and Duration seconds decimal strings, enums their names.
function loadCoordd({ protoDir = PROTO_DIR } = {}) {
  const def = protoLoader.loadSync(FILES.map((f) => `coord/v1/${f}.proto`), {
    includeDirs: [protoDir],
    keepCase: false,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  return grpc.loadPackageDefinition(def).coord.v1;
}

const MIN_BACKOFF_MS = 50;
const MAX_BACKOFF_MS = 1000;
// Codes after which a broken stream is resumed; any other ends the session.
const TRANSIENT = new Set([
  grpc.status.UNAVAILABLE, grpc.status.DEADLINE_EXCEEDED, grpc.status.CANCELLED, grpc.status.ABORTED,
  grpc.status.RESOURCE_EXHAUSTED, grpc.status.INTERNAL, grpc.status.UNKNOWN,
]);

const duration = (ms) => ({ seconds: String(Math.floor(ms / 1000)), nanos: Math.round((ms % 1000) * 1e6) });
const millis = (d) => Number(d.seconds) * 1000 + d.nanos / 1e6;

// One KeepAlive stream: its answers (and its end, as an Error) go to
// onAnswer, in order.
function openStream(client, metadata, onAnswer) {
  const call = client.KeepAlive(metadata || new grpc.Metadata());
  let ended = false;
  const end = (err) => {
    if (!ended) {
      ended = true;
      onAnswer(err);
    }
  };
  call.on('data', (resp) => { if (!ended) onAnswer(null, resp); });
  call.on('error', (err) => end(err));
  call.on('status', (st) => { if (st.code === grpc.status.OK) end(Object.assign(new Error('coordd ended the session'), { code: grpc.status.OK })); });
  call.on('end', () => end(Object.assign(new Error('coordd ended the session'), { code: grpc.status.OK })));
  return call;
}

class Session extends EventEmitter {
  // open opens a session on client (a coord.SessionService) and resolves
  // with it once coordd answered its first heartbeat.
  static async open(client, { ttlMs = 10_000, lockDelayMs = 0, metadata = null, openTimeoutMs = 5_000 } = {}) {
    const s = new Session(client, ttlMs, metadata, openTimeoutMs);
    const first = { sessionId: '', ttl: duration(ttlMs) };
    if (lockDelayMs > 0) first.lockDelay = duration(lockDelayMs);
    const resp = await s._open(first, openTimeoutMs);
    s.id = resp.sessionId;
    s._deadline = s._sentAt + millis(resp.ttl);
    s._sentAt = 0;
    s._schedule();
    return s;
  }

  constructor(client, ttlMs, metadata, openTimeoutMs) {
    super();
    this.client = client;
    this.ttlMs = ttlMs;
    this.id = '';
    this.done = false; // the session is over
    this.error = null; // why (null after a confirmed close)
    this._metadata = metadata;
    this._openTimeoutMs = openTimeoutMs;
    this._call = null;
    this._opening = null; // the stream _open is waiting on, cancelled by _end
    this._sentAt = 0; // when the heartbeat in flight was sent; 0 if none
    this._seen = new Set();
    this._timers = new Set();
    this._backoff = MIN_BACKOFF_MS;
    this._lastError = null;
    this._closing = null;
  }

  _timer(fn, ms) {
    const t = setTimeout(() => { this._timers.delete(t); fn(); }, ms);
    this._timers.add(t);
    return t;
  }

  // _open opens a stream with first as its first heartbeat and resolves
  // with the answer, or rejects (stream error, or no answer in time).
  _open(first, timeoutMs) {
    return new Promise((resolve, reject) => {
      let settled = false;
      const timer = this._timer(() => {
        if (!settled) { settled = true; this._opening = null; call.cancel(); reject(Object.assign(new Error(`no answer from coordd within ${timeoutMs}ms`), { code: grpc.status.DEADLINE_EXCEEDED })); }
      }, timeoutMs);
      const call = openStream(this.client, this._metadata, (err, resp) => {
        if (!settled) {
          settled = true;
          this._opening = null;
          clearTimeout(timer);
          this._timers.delete(timer);
          if (err) reject(err);
          else { this._call = call; resolve(resp); }
          return;
        }
        if (this._call === call) this._answer(err, resp);
      });
      this._opening = call;
      this._sentAt = Date.now();
      call.write(first);
    });
  }

  // _answer handles what the current stream delivers.
  _answer(err, resp) {
    if (err) {
      if (this._closing) { this._closing(err); return; }
      this._call = null;
      this._sentAt = 0;
      if (this.done) return;
      if (!TRANSIENT.has(err.code)) { this._end(new Error(`the session cannot be resumed: ${err.message}`)); return; }
      this._lastError = err;
      this._backoff = MIN_BACKOFF_MS;
      this._resume();
      return;
    }
    this._handle(resp, this._sentAt);
    this._sentAt = 0;
  }

  _handle(resp, sentAt) {
    for (const l of resp.lostLocks || []) {
      const kind = l.kind === 'HOLD_KIND_UNSPECIFIED' ? 'HOLD_KIND_LOCK' : l.kind;
      const key = `${kind} ${l.name} ${l.fence}`;
      if (!this._seen.has(key)) { // coordd repeats a report until a heartbeat saw it
        this._seen.add(key);
        this.emit('lost', { kind, name: l.name, fence: l.fence, reason: l.reason });
      }
    }
    if (resp.expired) this._end(new Error('coordd reports the session expired'));
    else if (resp.superseded) this._end(new Error('another stream resumed the session'));
    else if (sentAt) this._deadline = Math.max(this._deadline, sentAt + millis(resp.ttl));
  }

  // _schedule arms the next heartbeat and the lease's end.
  _schedule() {
    if (this.done || this._closing) return;
    this._timer(() => this._beat(), this.ttlMs / 3);
  }

  _beat() {
    if (this.done || this._closing) return;
    if (Date.now() >= this._deadline) {
      const last = this._lastError ? `; last error: ${this._lastError.message}` : '';
      this._end(new Error(`no heartbeat was answered within the session TTL (${this.ttlMs}ms)${last}`));
      return;
    }
    if (this._call && !this._sentAt) {
      this._sentAt = Date.now();
      this._call.write({ sessionId: this.id, ttl: duration(this.ttlMs) });
    }
    this._timer(() => this._beat(), Math.min(this.ttlMs / 3, Math.max(1, this._deadline - Date.now())));
  }

  _resume() {
    if (this.done || this._closing) return;
    const left = this._deadline - Date.now();
    if (left <= 0) return; // _beat ends the session
    this._open({ sessionId: this.id, ttl: duration(this.ttlMs) }, Math.min(this._openTimeoutMs, left)).then(
      (resp) => { const sent = this._sentAt; this._sentAt = 0; this._handle(resp, sent); },
      (err) => {
        if (this.done || this._closing) return;
        if (!TRANSIENT.has(err.code)) { this._end(new Error(`the session cannot be resumed: ${err.message}`)); return; }
        this._lastError = err;
        const wait = this._backoff / 2 + Math.random() * (this._backoff / 2);
        this._backoff = Math.min(2 * this._backoff, MAX_BACKOFF_MS);
        this._timer(() => this._resume(), wait);
      },
    );
  }

  _end(err) {
    if (this.done) return;
    this.done = true;
    this.error = err;
    for (const t of this._timers) clearTimeout(t);
    this._timers.clear();
    // A resume still waiting for its answer must not bring a stream (and
    // 'lost' events) back to a session that is over.
    if (this._opening) { this._opening.cancel(); this._opening = null; }
    this.emit('done', err);
  }

  // close half-closes the stream, so that coordd ends the session and
  // releases its holds now, and resolves with true once coordd confirms
  // (false: not confirmed within timeoutMs; the holds end at the TTL).
  close(timeoutMs = 5_000) {
    if (this.done) { if (this._call) this._call.cancel(); return Promise.resolve(this.error === null); }
    return new Promise((resolve) => {
      const call = this._call;
      if (!call) { this._end(new Error('closed while the stream was broken')); resolve(false); return; }
      const timer = setTimeout(() => { call.cancel(); this._end(new Error('coordd did not confirm the end of the session')); resolve(false); }, timeoutMs);
      this._closing = (err) => {
        clearTimeout(timer);
        const ok = err.code === grpc.status.OK || err.code === grpc.status.FAILED_PRECONDITION;
        this._end(ok ? null : err);
        resolve(ok);
      };
      for (const t of this._timers) clearTimeout(t);
      this._timers.clear();
      call.end();
    });
  }
}

module.exports = { loadCoordd, Session, duration, millis };
