'use strict';
// coordd from Node.js: this package (index.js: the services loaded from
// api/proto at run time, no generated code, and the Session helper) against
// a running coordd. Both an example of calling the services and an
// end-to-end test (e2e/node_test.go runs it against a fresh daemon in CI).
//
//   cd clients/node && npm ci && COORDD_ADDR=127.0.0.1:7070 node --test test.js
//
// COORDD_ADDR   host:port of coordd's gRPC listener (default 127.0.0.1:7070)
// COORDD_API_KEY if set, sent on every call as `authorization: Bearer <key>`
//
// Every name, key and queue gets a random suffix, so the test can run again
// and again against one daemon.

const { describe, test, after } = require('node:test');
const assert = require('node:assert/strict');
const crypto = require('node:crypto');
const net = require('node:net');
const path = require('node:path');

const grpc = require('@grpc/grpc-js');

const ADDR = process.env.COORDD_ADDR || '127.0.0.1:7070';
const API_KEY = process.env.COORDD_API_KEY || '';
const ADDR_ONE_SESSION = process.env.COORDD_ADDR_ONE_SESSION || '';
const PROTO_DIR = path.join(__dirname, '..', '..', 'api', 'proto');
const CALL_TIMEOUT_MS = 10_000;

// The services, loaded from api/proto by this package's loadCoordd.
const { loadCoordd, Session, statusDetails, overloaded } = require('./index.js');
const coord = loadCoordd({ protoDir: PROTO_DIR });

// decodeStatusDetails returns the google.rpc.Status in err's trailers with
// its details decoded (index.js's statusDetails), asserting it is there.
function decodeStatusDetails(err) {
  const st = statusDetails(err);
  assert.ok(st, `no grpc-status-details-bin trailer on ${err}`);
  return st;
}

// The API key, if any, goes on every call (unary and streaming) through an
// interceptor rather than on each call's metadata.
const interceptors = API_KEY
  ? [
      (options, nextCall) =>
        new grpc.InterceptingCall(nextCall(options), {
          start(metadata, listener, next) {
            metadata.set('authorization', `Bearer ${API_KEY}`);
            next(metadata, listener);
          },
        }),
    ]
  : [];

const credentials = grpc.credentials.createInsecure();
const locks = new coord.LockService(ADDR, credentials, { interceptors });
const limits = new coord.RateLimitService(ADDR, credentials, { interceptors });
const idem = new coord.IdempotencyService(ADDR, credentials, { interceptors });
const queues = new coord.QueueService(ADDR, credentials, { interceptors });
const sessions = new coord.SessionService(ADDR, credentials, { interceptors });
after(() => {
  for (const c of [locks, limits, idem, queues, sessions]) c.close();
});

// call makes a unary call with a deadline and returns its response.
function call(client, method, request) {
  return new Promise((resolve, reject) => {
    client[method](request, { deadline: Date.now() + CALL_TIMEOUT_MS }, (err, response) =>
      err ? reject(err) : resolve(response),
    );
  });
}

const unique = (prefix) => `node-${prefix}-${crypto.randomBytes(6).toString('hex')}`;
const seconds = (s) => ({ seconds: s, nanos: 0 }); // a google.protobuf.Duration
const millis = (d) => Number(d.seconds) * 1000 + d.nanos / 1e6; // and back
const HEX32 = /^[0-9a-f]{32}$/;

describe('LockService', () => {
  const name = unique('lock');
  let grant;

  test('Lock acquires a free lock with a token and a fence', async () => {
    grant = await call(locks, 'Lock', { name, ttl: seconds(30), owner: 'alice' });
    assert.equal(grant.acquired, true);
    assert.match(grant.token, HEX32);
    assert.ok(BigInt(grant.fence) > 0n, `fence ${grant.fence}`);
    assert.equal(millis(grant.ttl), 30_000);
    assert.ok(grant.expireTime && Number(grant.expireTime.seconds) > 0);
  });

  test('a second Lock by another owner is not acquired and names the holder', async () => {
    assert.ok(grant, 'no grant from the previous step');
    const denied = await call(locks, 'Lock', { name, ttl: seconds(30), owner: 'bob' });
    assert.equal(denied.acquired, false);
    assert.equal(denied.token, '');
    assert.equal(denied.fence, '0');
    assert.equal(denied.holder, 'alice');
    assert.ok(millis(denied.ttl) > 0 && millis(denied.ttl) <= 30_000, `ttl ${JSON.stringify(denied.ttl)}`);
  });

  test('Release by the token frees the lock; a retry releases nothing', async () => {
    assert.ok(grant, 'no grant from the previous step');
    assert.equal((await call(locks, 'Release', { name, token: grant.token })).released, true);
    assert.equal((await call(locks, 'Release', { name, token: grant.token })).released, false);
    assert.equal((await call(locks, 'GetLock', { name })).held, false);
  });
});

test('RateLimitService.Allow with an inline fixed window of 2 is denied on the third call', async () => {
  const key = unique('rate');
  const limit = { algorithm: 'ALGORITHM_FIXED_WINDOW', limit: 2, period: seconds(60) };
  // Windows are aligned to the epoch: should one end between the calls, the
  // count starts again, so call until denied (at most twice more).
  const answers = [];
  let denied;
  for (let i = 0; i < 5 && !denied; i++) {
    const a = await call(limits, 'Allow', { key, limit });
    answers.push(a);
    if (!a.allowed) denied = a;
  }
  assert.ok(denied, `never denied: ${JSON.stringify(answers)}`);
  assert.ok(answers.length >= 3, `denied after ${answers.length - 1} calls`);
  assert.deepEqual(answers.slice(0, 2).map((a) => [a.allowed, a.remaining]), [[true, '1'], [true, '0']]);
  assert.equal(denied.remaining, '0');
  assert.equal(denied.limit, '2');
  const retry = millis(denied.retryAfter);
  assert.ok(retry > 0 && retry <= 60_000, `retryAfter ${JSON.stringify(denied.retryAfter)}`);
});

describe('IdempotencyService', () => {
  const key = unique('idem');
  const fingerprint = 'sha256:' + crypto.createHash('sha256').update(key).digest('hex');
  const result = Buffer.from('ok: charged 7');
  let ownerToken;

  test('BeginIdempotent on a new key answers EXECUTE with an owner token', async () => {
    const begin = await call(idem, 'BeginIdempotent', { key, fingerprint });
    assert.equal(begin.outcome, 'OUTCOME_EXECUTE');
    assert.match(begin.ownerToken, HEX32);
    ownerToken = begin.ownerToken;
  });

  test('Finish stores the result', async () => {
    assert.ok(ownerToken, 'no owner token from the previous step');
    assert.equal((await call(idem, 'Finish', { key, ownerToken, result })).stored, true);
  });

  test('BeginIdempotent again answers COMPLETED with the same result bytes', async () => {
    const again = await call(idem, 'BeginIdempotent', { key, fingerprint });
    assert.equal(again.outcome, 'OUTCOME_COMPLETED');
    assert.equal(again.ownerToken, '');
    assert.ok(Buffer.isBuffer(again.result));
    assert.deepEqual(again.result, result);
  });
});

describe('QueueService', () => {
  const queue = unique('queue');
  const payload = Buffer.from([0x00, 0xff, 0x68, 0x69]); // not UTF-8: bytes stay bytes
  let messageId;
  let claimed;

  test('Enqueue adds a message', async () => {
    const enq = await call(queues, 'Enqueue', { queue, payload });
    assert.match(enq.messageId, HEX32);
    assert.equal(enq.duplicate, false);
    messageId = enq.messageId;
  });

  test('Claim hands it out with a receipt', async () => {
    assert.ok(messageId, 'no message from the previous step');
    const resp = await call(queues, 'Claim', { queue, wait: seconds(5) });
    assert.equal(resp.messages.length, 1);
    [claimed] = resp.messages;
    assert.equal(claimed.messageId, messageId);
    assert.deepEqual(claimed.payload, payload);
    assert.equal(claimed.attempt, 1);
    assert.ok(claimed.receipt.length > 0);
  });

  test('Ack deletes it', async () => {
    assert.ok(claimed, 'no claim from the previous step');
    assert.equal((await call(queues, 'Ack', { queue, receipt: claimed.receipt })).acked, true);
    const stats = await call(queues, 'Stats', { queue });
    assert.deepEqual([stats.ready, stats.delayed, stats.inFlight, stats.dead], ['0', '0', '0', '0']);
  });
});

// KeepAliveStream wraps a bidirectional stream: next() resolves with the next
// response, done resolves with the final status when the server ends the
// stream with OK and rejects with its error otherwise.
class KeepAliveStream {
  constructor(client) {
    this.call = client.KeepAlive({ deadline: Date.now() + 30_000 });
    this.responses = [];
    this.waiters = [];
    this.failure = null;
    this.done = new Promise((resolve, reject) => {
      this.call.on('status', (st) => {
        if (st.code === grpc.status.OK) resolve(st);
      });
      this.call.on('error', (err) => {
        this.failure = err;
        for (const w of this.waiters.splice(0)) w.reject(err);
        reject(err);
      });
    });
    this.done.catch(() => {}); // observed by whoever awaits it
    this.call.on('data', (resp) => {
      const w = this.waiters.shift();
      if (w) w.resolve(resp);
      else this.responses.push(resp);
    });
    this.call.on('end', () => {
      const err = new Error('stream ended with no further response');
      for (const w of this.waiters.splice(0)) w.reject(err);
    });
  }

  send(request) {
    this.call.write(request);
    return this.next();
  }

  next() {
    if (this.responses.length > 0) return Promise.resolve(this.responses.shift());
    if (this.failure) return Promise.reject(this.failure);
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
  }
}

describe('SessionService.KeepAlive', () => {
  const name = unique('session-lock');
  let stream;
  let sessionId;

  after(() => {
    if (stream) stream.call.cancel(); // a no-op once the stream has ended
  });

  test('the first request creates a session', async () => {
    stream = new KeepAliveStream(sessions);
    const first = await stream.send({ sessionId: '', ttl: seconds(10) });
    assert.match(first.sessionId, HEX32);
    assert.equal(first.expired, false);
    assert.equal(millis(first.ttl), 10_000);
    sessionId = first.sessionId;
  });

  test('a Lock bound to the session is acquired', async () => {
    assert.ok(sessionId, 'no session from the previous step');
    const grant = await call(locks, 'Lock', { name, sessionId, owner: 'node-session' });
    assert.equal(grant.acquired, true);
    const held = await call(locks, 'GetLock', { name });
    assert.equal(held.held, true);
    assert.equal(held.sessionBound, true);
    assert.equal(held.sessionId, undefined, 'GetLock must never name the session');
    assert.equal(held.owner, 'node-session');
  });

  test('two heartbeats are answered for the same session', async () => {
    assert.ok(sessionId, 'no session from the previous step');
    const beat1 = await stream.send({ sessionId });
    const beat2 = await stream.send({}); // later requests may leave session_id empty
    for (const beat of [beat1, beat2]) {
      assert.equal(beat.sessionId, sessionId);
      assert.equal(beat.expired, false);
      assert.deepEqual(beat.lostLocks, []);
    }
  });

  test('half-closing ends the stream with OK', async () => {
    assert.ok(stream, 'no stream from the previous steps');
    stream.call.end();
    const st = await stream.done;
    assert.equal(st.code, grpc.status.OK);
    assert.deepEqual(stream.responses, [], 'no response after the half-close');
  });

  test('the session ended, and its lock is free', async () => {
    const lock = await call(locks, 'GetLock', { name });
    assert.equal(lock.held, false);
  });
});

test('Lock with ttl 0s is INVALID_ARGUMENT with a google.rpc.ErrorInfo', async () => {
  const err = await call(locks, 'Lock', { name: unique('bad'), ttl: seconds(0) }).then(
    (resp) => assert.fail(`Lock with ttl 0s answered ${JSON.stringify(resp)}`),
    (e) => e,
  );
  assert.equal(err.code, grpc.status.INVALID_ARGUMENT);
  assert.equal(err.code, 3);
  assert.match(err.details, /ttl/);

  const st = decodeStatusDetails(err);
  assert.equal(st.code, 3);
  assert.equal(st.message, err.details);
  const info = st.details['google.rpc.ErrorInfo'];
  assert.ok(info, `no ErrorInfo among ${Object.keys(st.details)}`);
  assert.equal(info.reason, 'INVALID_ARGUMENT');
  assert.equal(info.domain, 'coordd');
  assert.equal(info.metadata.field, 'ttl');
  const bad = st.details['google.rpc.BadRequest'];
  assert.ok(bad, `no BadRequest among ${Object.keys(st.details)}`);
  assert.equal(bad.field_violations[0].field, 'ttl');
});

// startProxy forwards TCP connections to target (host:port) from a port of
// its own on 127.0.0.1. cut() destroys every forwarded connection at both
// ends, as a network failure would: neither side ends its streams, so
// coordd sees a broken stream, not a half-close (a stream cancelled with
// grpc-js's cancel() reaches coordd as a clean end, which ends the
// session). While down, it accepts connections and destroys them at once.
async function startProxy(target) {
  const colon = target.lastIndexOf(':');
  const host = target.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
  const port = Number(target.slice(colon + 1));
  const open = new Set(); // every socket of a forwarded connection
  let down = false;
  let accepted = 0;
  const server = net.createServer((client) => {
    accepted++;
    if (down) {
      client.destroy();
      return;
    }
    const upstream = net.connect(port, host);
    const drop = () => {
      for (const sock of [client, upstream]) {
        open.delete(sock);
        sock.destroy();
      }
    };
    for (const sock of [client, upstream]) {
      open.add(sock);
      sock.on('error', drop);
      sock.on('close', drop);
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  const proxy = {
    addr: `127.0.0.1:${server.address().port}`,
    accepted: () => accepted, // connections accepted so far
    cut() {
      for (const sock of [...open]) sock.destroy();
    },
    setDown(on) {
      down = on;
      if (on) proxy.cut();
    },
    close() {
      proxy.setDown(true);
      return new Promise((resolve) => server.close(resolve));
    },
  };
  return proxy;
}

describe('Session (the helper in index.js)', () => {
  const opened = [];
  after(async () => {
    for (const s of opened) await s.close(1000);
  });
  const open = async (opts, client = sessions) => {
    const metadata = new grpc.Metadata();
    if (API_KEY) metadata.set('authorization', `Bearer ${API_KEY}`);
    const s = await Session.open(client, { metadata, ...opts });
    opened.push(s);
    return s;
  };
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  // proxied returns a SessionService client that reaches coordd through a
  // proxy of its own, and the proxy; both are closed after the test.
  const proxied = async (t) => {
    const proxy = await startProxy(ADDR);
    const client = new coord.SessionService(proxy.addr, credentials, { interceptors });
    t.after(() => {
      client.close();
      return proxy.close();
    });
    return { proxy, client };
  };

  test('keeps its lock past several TTLs, and close() releases it', async () => {
    const s = await open({ ttlMs: 1000 });
    assert.match(s.id, HEX32);
    const name = unique('helper');
    assert.equal((await call(locks, 'Lock', { name, sessionId: s.id })).acquired, true);
    await sleep(2500);
    assert.equal(s.done, false, String(s.error));
    assert.equal((await call(locks, 'GetLock', { name })).held, true);
    const lost = [];
    s.on('lost', (hold) => lost.push(hold));
    assert.equal(await s.close(), true);
    assert.equal(s.error, null);
    assert.deepEqual(lost, [], 'a confirmed close reports no loss');
    assert.equal((await call(locks, 'GetLock', { name })).held, false);
  });

  test("reports a lock lost at its max hold, by name and reason", async () => {
    const s = await open({ ttlMs: 1000 });
    const name = unique('capped');
    const lost = new Promise((resolve) => s.once('lost', resolve));
    const grant = await call(locks, 'Lock', { name, sessionId: s.id, maxHold: { seconds: '0', nanos: 300_000_000 } });
    assert.equal(grant.acquired, true);
    const hold = await lost;
    assert.deepEqual(hold, { kind: 'HOLD_KIND_LOCK', name, fence: grant.fence, reason: 'LOCK_LOSS_REASON_MAX_HOLD' });
    assert.equal(s.done, false);
  });

  test('resumes its session after the connection is cut: the same lock, no loss', async (t) => {
    const { proxy, client } = await proxied(t);
    const s = await open({ ttlMs: 1000 }, client);
    const lost = [];
    s.on('lost', (hold) => lost.push(hold));
    const name = unique('resumed');
    const grant = await call(locks, 'Lock', { name, sessionId: s.id, owner: 'node-resumed' });
    assert.equal(grant.acquired, true);
    // Twice, so that the second cut breaks a resumed stream. Each wait is
    // longer than the TTL: had the helper not resumed, coordd would have
    // expired the session and the helper ended it ('done').
    for (const cut of [1, 2]) {
      const before = proxy.accepted();
      proxy.cut();
      await sleep(1500);
      assert.equal(s.done, false, `after cut ${cut}: ${s.error}`);
      assert.ok(proxy.accepted() > before, `after cut ${cut}: no new connection through the proxy`);
    }
    const held = await call(locks, 'GetLock', { name });
    assert.equal(held.held, true);
    assert.equal(held.fence, grant.fence, 'the same grant, not a new one');
    const other = await call(locks, 'Lock', { name, ttl: seconds(30), owner: 'node-other' });
    assert.equal(other.acquired, false);
    assert.equal(other.holder, 'node-resumed');
    assert.deepEqual(lost, []);
    assert.equal(await s.close(), true, 'close() on the resumed stream');
    assert.equal((await call(locks, 'GetLock', { name })).held, false);
  });

  test("a cut longer than the TTL reports the session lost, then 'done'; coordd reports the lock lost by name", async (t) => {
    const { proxy, client } = await proxied(t);
    const s = await open({ ttlMs: 1000 }, client);
    const events = [];
    s.on('lost', (hold) => events.push(['lost', hold]));
    const done = new Promise((resolve) => s.once('done', (err) => { events.push(['done', err]); resolve(err); }));
    const name = unique('expired');
    const grant = await call(locks, 'Lock', { name, sessionId: s.id, owner: 'node-expired' });
    assert.equal(grant.acquired, true);
    proxy.setDown(true); // cuts the connection; every resume fails until the session is over
    const err = await done;
    assert.match(String(err), /no heartbeat was answered within the session TTL/);
    // The session itself is reported lost, before 'done': a caller that
    // listens to 'lost' alone stops its work; nothing says released.
    assert.deepEqual(events, [
      ['lost', { kind: 'SESSION', name: '', fence: '0', reason: 'LOCK_LOSS_REASON_SESSION_EXPIRED', error: err }],
      ['done', err],
    ]);
    assert.equal(await s.close(), false, 'close() after the session is over');
    // coordd's lease ends no earlier than the helper's local deadline: wait
    // for it, then it frees the lock.
    const by = Date.now() + 3000;
    while ((await call(locks, 'GetLock', { name })).held) {
      assert.ok(Date.now() < by, 'the lock is still held 3s after the session ended');
      await sleep(50);
    }
    // A resume now (on a direct connection: the proxied channel is in
    // grpc-js's reconnect backoff) gets coordd's report: the session
    // expired, with the lock lost by name and fence.
    const stream = new KeepAliveStream(sessions);
    t.after(() => stream.call.cancel());
    const resp = await stream.send({ sessionId: s.id, ttl: seconds(1) });
    assert.equal(resp.expired, true);
    assert.deepEqual(
      resp.lostLocks.map((l) => [l.name, l.fence, l.reason]),
      [[name, grant.fence, 'LOCK_LOSS_REASON_SESSION_EXPIRED']],
    );
  });
});

// A coordd with limits.max_sessions 1 refuses a second session OVERLOADED
// with a retry_after; Session.open keeps trying after it and gets in once
// the first session has closed, and no sooner.
test('Session.open waits out OVERLOADED at limits.max_sessions', async () => {
  assert.ok(ADDR_ONE_SESSION, 'COORDD_ADDR_ONE_SESSION (a coordd with limits.max_sessions 1) is not set');
  const sessions = new coord.SessionService(ADDR_ONE_SESSION, credentials, { interceptors });
  try {
    const first = await Session.open(sessions, { ttlMs: 5_000 });
    const refused = await Session.open(sessions, { ttlMs: 5_000, overloadWaitMs: 0 }).then(
      (s) => { s.close(); assert.fail('a second session beside the first at limits.max_sessions 1'); },
      (e) => e,
    );
    assert.equal(refused.code, grpc.status.RESOURCE_EXHAUSTED);
    assert.ok(overloaded(refused) > 0, `no retry_after in ${refused}`);
    let second = null;
    const opening = Session.open(sessions, { ttlMs: 5_000, overloadWaitMs: 30_000 }).then((s) => { second = s; });
    await new Promise((resolve) => setTimeout(resolve, 1500));
    assert.equal(second, null, 'a second session was opened beside the first');
    assert.equal(await first.close(), true);
    await Promise.race([opening, new Promise((_, reject) => setTimeout(() => reject(new Error('no session within 10s of a slot freeing')), 10_000))]);
    assert.notEqual(second.id, first.id);
    assert.equal(await second.close(), true);
  } finally {
    sessions.close();
  }
});
