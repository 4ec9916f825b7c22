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
//
// 'lost' reports a hold coordd took back while the session lives (by
// kind, name and fence), and the session itself when it ends without a
// close() that coordd confirmed: its TTL ran out with no heartbeat
// answered (a connection cut for longer than the TTL), coordd reported it
// expired, another stream resumed it, or it could not be resumed. That
// one has kind 'SESSION' (name '', fence '0', reason
// 'LOCK_LOSS_REASON_SESSION_EXPIRED', and the error): every hold bound to
// the session is lost, and coordd frees them at the session's TTL. It
// comes before 'done', which then has the same error; a close() that
// coordd confirmed reports no loss.
//
// A coordd at capacity refuses a new session with RESOURCE_EXHAUSTED,
// reason OVERLOADED, naming a retry_after (overloaded(err) reads it):
// Session.open tries again after it, with jitter (between half of it and
// one and a half times it), for up to overloadWaitMs (default 60 s; 0: not
// at all).

const path = require('node:path');
const { EventEmitter } = require('node:events');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');

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

// google.rpc.Status and the details coordd sends, field for field as in
// googleapis' google/rpc/status.proto and error_details.proto (only the
// messages coordd uses), to decode the grpc-status-details-bin trailer.
const rpcRoot = new protobuf.Root();
protobuf.parse(`syntax = "proto3"; package google.protobuf;
  message Any { string type_url = 1; bytes value = 2; }
  message Duration { int64 seconds = 1; int32 nanos = 2; }`, rpcRoot, { keepCase: true });
protobuf.parse(`syntax = "proto3"; package google.rpc;
  message Status { int32 code = 1; string message = 2; repeated google.protobuf.Any details = 3; }
  message ErrorInfo { string reason = 1; string domain = 2; map<string, string> metadata = 3; }
  message RetryInfo { google.protobuf.Duration retry_delay = 1; }
  message BadRequest {
    message FieldViolation { string field = 1; string description = 2; }
    repeated FieldViolation field_violations = 1;
  }`, rpcRoot, { keepCase: true });
rpcRoot.resolveAll();
const RpcStatus = rpcRoot.lookupType('google.rpc.Status');

// statusDetails returns the google.rpc.Status in a gRPC error's trailers
// with its details decoded, keyed by their type name (e.g.
// 'google.rpc.ErrorInfo'), or null if it has none.
function statusDetails(err) {
  const [bin] = err && err.metadata ? err.metadata.get('grpc-status-details-bin') : [];
  if (!Buffer.isBuffer(bin)) return null;
  const st = RpcStatus.decode(bin);
  const details = {};
  for (const any of st.details) {
    const typeName = any.type_url.slice(any.type_url.lastIndexOf('/') + 1);
    const type = rpcRoot.lookup(typeName);
    if (type instanceof protobuf.Type) details[typeName] = type.toObject(type.decode(any.value), { defaults: true, longs: Number });
  }
  return { code: st.code, message: st.message, details };
}

// overloaded returns how many milliseconds coordd asked to wait when err
// is its refusal of new work at capacity (RESOURCE_EXHAUSTED, reason
// OVERLOADED), else null. A refusal without a readable retry_after asks
// for a second.
function overloaded(err) {
  if (!err || err.code !== grpc.status.RESOURCE_EXHAUSTED) return null;
  let st;
  try { st = statusDetails(err); } catch { return null; }
  const info = st && st.details['google.rpc.ErrorInfo'];
  if (!info || info.domain !== 'coordd' || info.reason !== 'OVERLOADED') return null;
  const text = info.metadata.retry_after || '';
  const secs = text.endsWith('s') ? Number(text.slice(0, -1)) : NaN;
  return secs > 0 ? secs * 1000 : 1000;
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
  static async open(client, { ttlMs = 10_000, lockDelayMs = 0, metadata = null, openTimeoutMs = 5_000, overloadWaitMs = 60_000 } = {}) {
    const s = new Session(client, ttlMs, metadata, openTimeoutMs);
    const first = { sessionId: '', ttl: duration(ttlMs) };
    if (lockDelayMs > 0) first.lockDelay = duration(lockDelayMs);
    const giveUp = Date.now() + overloadWaitMs;
    let resp;
    for (;;) {
      try {
        resp = await s._open(first, openTimeoutMs);
        break;
      } catch (err) {
        const retry = overloaded(err);
        if (retry === null || Date.now() + retry / 2 > giveUp) throw err;
        const wait = Math.min(retry / 2 + Math.random() * retry, Math.max(0, giveUp - Date.now()));
        await new Promise((resolve) => setTimeout(resolve, wait));
      }
    }
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
    if (err !== null) {
      // Not a confirmed close: every hold bound to the session is lost.
      this.emit('lost', { kind: 'SESSION', name: '', fence: '0', reason: 'LOCK_LOSS_REASON_SESSION_EXPIRED', error: err });
    }
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
        // OK: coordd ended the session and released its holds. Anything
        // else (FAILED_PRECONDITION: another stream has the session) left
        // them to end at the TTL.
        const ok = err.code === grpc.status.OK;
        this._end(ok ? null : err);
        resolve(ok);
      };
      for (const t of this._timers) clearTimeout(t);
      this._timers.clear();
      call.end();
    });
  }
}

module.exports = { loadCoordd, Session, duration, millis, statusDetails, overloaded };
