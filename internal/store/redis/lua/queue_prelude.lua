-- The prelude of every queue script, after the common one. A queue's keys,
-- all under the queue's hash tag:
-- KEYS[1]  pending   sorted set of refs by due time µs: ready from then on,
--                    delayed until then
-- KEYS[2]  inflight  sorted set of refs by claim deadline µs, for claims
--                    with attempts left: ready again from the deadline on
-- KEYS[3]  last      sorted set of refs by claim deadline µs, for claims on
--                    the message's last attempt: dead from the deadline on
-- KEYS[4]  dead      sorted set of the dead letters' refs by when each died
--                    µs; forgotten dead-letter ttl after that
-- KEYS[5]  msg       hash: message ID -> the encoded message (codec.go), of
--                    the messages in pending, inflight and last
-- KEYS[6]  meta      hash: message ID -> its meta record,
--                    "v1|seq|attempt|max attempts|deliver µs|enqueue µs|receipt"
--                    (v1: its version; a record of another is corrupt)
-- KEYS[7]  deadmsg   hash: a dead letter's ID -> its meta, "\n", the
--                    encoded message
-- KEYS[8]  dedup     hash: dedup ID -> "message ID|deliver µs"
-- KEYS[9]  dedupexp  sorted set of dedup IDs by expiry µs
-- KEYS[10] seq       the enqueue counter
-- ARGV[3]: the dead-letter ttl µs. A script's own arguments start at ARGV[4].
--
-- A ref is the message's sequence number (16 hex digits) followed by its
-- ID, so that messages due at the same instant keep their enqueue order.
-- A ready message is one of pending or inflight due by now; Claim takes
-- the one due first across both, so messages are served in the order they
-- became due, whatever moved them. Counts come from scores (ZCOUNT), never
-- from how far an upkeep got.
--
-- Lifetimes: while the queue has a message in pending or inflight,
-- pending, inflight, msg, meta and seq have no expiry (they hold live
-- messages only, and Redis deletes them when empty); with only claims on a
-- last attempt left, msg, meta and seq expire with the last of those (its
-- deadline + the dead-letter ttl); with no message left, they are deleted
-- (a new seq only has to order new messages). That is settle, at the end of
-- every script. last and dead expire dead-letter ttl after their latest
-- score, deadmsg with dead, dedup and dedupexp at their latest expiry, set
-- whenever one gets a member. So the records of a queue nobody touches
-- again end by themselves; upkeep deletes the ended ones of a queue in
-- use, in bounded batches.
local BATCH = 1000
local deadTTL = tonumber(ARGV[3])

-- A meta record starts with its version, so that a record of another
-- version (or none: the unversioned records before it) is never misread.
-- The version is a letter and a number, and a record without it starts
-- with the seq's 16 hex digits, which no version matches.
local META = 'v1'

local function metaString(m)
  return META .. '|' .. m.seq .. '|' .. s(m.attempt) .. '|' .. s(m.max) .. '|' .. s(m.deliver) .. '|' ..
    s(m.enqueued) .. '|' .. m.receipt
end

local function parseMeta(m)
  local v, seq, attempt, max, deliver, enqueued, receipt =
    string.match(m, '^(%w+)|(%x+)|(%d+)|(%d+)|(%d+)|(%d+)|(.*)$')
  if v ~= META then corrupt('queue meta record') end
  return {seq = seq, attempt = tonumber(attempt), max = tonumber(max), deliver = tonumber(deliver),
    enqueued = tonumber(enqueued), receipt = receipt}
end

-- getMeta returns the meta of message id, or nil if there is none.
local function getMeta(id)
  local m = redis.call('HGET', KEYS[6], id)
  if not m then return nil end
  return parseMeta(m)
end

-- body returns the encoded message of a message in pending, inflight or
-- last, which has one.
local function body(id)
  local b = redis.call('HGET', KEYS[5], id)
  if not b then corrupt('queue message record missing') end
  return b
end

local function setMeta(id, m)
  redis.call('HSET', KEYS[6], id, metaString(m))
end

local function nextSeq()
  return string.format('%016x', redis.call('INCR', KEYS[10]))
end

-- claimSet is the set that holds a claim of m: last on its last attempt.
local function claimSet(m)
  if m.attempt >= m.max then return KEYS[3] end
  return KEYS[2]
end

-- latest is the highest score in key, or nil if it is empty.
local function latest(key)
  local r = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if #r == 0 then return nil end
  return tonumber(r[2])
end

-- The lifetimes of the keys of a set that only lose members by upkeep or
-- by the operation that ends them: each is set when a member is added,
-- from the set's latest score (a removal can only leave it longer than
-- needed, until Redis deletes the emptied set and hash by itself).
local function expireLast()
  expireAt(KEYS[3], latest(KEYS[3]) + deadTTL)
end
local function expireDead()
  local at = latest(KEYS[4]) + deadTTL
  expireAt(KEYS[4], at)
  expireAt(KEYS[7], at)
end
local function expireDedup()
  local at = latest(KEYS[9])
  expireAt(KEYS[8], at)
  expireAt(KEYS[9], at)
end

-- bury makes the message of a claim that ended (already removed from last,
-- or removed after it) a dead letter since at, or forgets it if its
-- dead-letter ttl has passed: its meta m may be nil then, since its records
-- expire with it (settle), but not before.
local function bury(id, m, ref, at)
  if at + deadTTL <= now then
    redis.call('HDEL', KEYS[5], id)
    redis.call('HDEL', KEYS[6], id)
    return
  end
  if not m then corrupt('queue meta record missing') end
  local b = body(id)
  redis.call('HDEL', KEYS[5], id)
  redis.call('HDEL', KEYS[6], id)
  m.receipt = ''
  redis.call('HSET', KEYS[7], id, metaString(m) .. '\n' .. b)
  redis.call('ZADD', KEYS[4], s(at), ref)
  expireDead()
end

-- upkeep deletes what has ended, at most BATCH of each kind: claims that
-- ended on their last attempt become dead letters; dead letters past their
-- ttl and expired dedup IDs are forgotten. Reads do not depend on it: they
-- go by scores.
local function upkeep()
  local ended = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', s(now), 'WITHSCORES', 'LIMIT', 0, BATCH)
  for i = 1, #ended, 2 do
    local ref = ended[i]
    local id = string.sub(ref, 17)
    bury(id, getMeta(id), ref, tonumber(ended[i + 1]))
    redis.call('ZREM', KEYS[3], ref)
  end
  local old = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', s(now - deadTTL), 'LIMIT', 0, BATCH)
  for i = 1, #old do
    redis.call('ZREM', KEYS[4], old[i])
    redis.call('HDEL', KEYS[7], string.sub(old[i], 17))
  end
  old = redis.call('ZRANGEBYSCORE', KEYS[9], '-inf', s(now), 'LIMIT', 0, BATCH)
  for i = 1, #old do
    redis.call('HDEL', KEYS[8], old[i])
    redis.call('ZREM', KEYS[9], old[i])
  end
end

-- firstIn returns the first ref of key whose score lies in [lo, hi], and its
-- score (lo, hi: ZRANGEBYSCORE bounds).
local function firstIn(key, lo, hi)
  local r = redis.call('ZRANGEBYSCORE', key, lo, hi, 'WITHSCORES', 'LIMIT', 0, 1)
  if #r == 0 then return nil end
  return r[1], tonumber(r[2])
end

-- before reports whether ref a with score x comes before ref b with score y:
-- by score, then by sequence number (compared as numbers: Lua compares
-- strings by the server's locale, not bytewise as a sorted set does).
local function before(a, x, b, y)
  if x ~= y then return x < y end
  local sa, sb = tonumber(string.sub(a, 1, 16), 16), tonumber(string.sub(b, 1, 16), 16)
  if sa ~= sb then return sa < sb end
  return a < b
end

-- readyRefs returns, in the order they became due, up to n ready refs,
-- pending or redelivered, each with the set that holds it.
local function readyRefs(n)
  local p = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', s(now), 'WITHSCORES', 'LIMIT', 0, n)
  local f = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', s(now), 'WITHSCORES', 'LIMIT', 0, n)
  local out, i, j = {}, 1, 1
  while #out < n and (i < #p or j < #f) do
    if j < #f and (i >= #p or before(f[j], tonumber(f[j + 1]), p[i], tonumber(p[i + 1]))) then
      out[#out + 1] = {f[j], KEYS[2]}
      j = j + 2
    else
      out[#out + 1] = {p[i], KEYS[1]}
      i = i + 2
    end
  end
  return out
end

-- claimed returns the ID, meta, ref and claim set of the message of a live
-- claim, or nil.
local function claimed(receipt)
  local id = string.sub(receipt, 1, 32)
  local m = getMeta(id)
  if not m or m.receipt ~= receipt then return nil end
  local ref = m.seq .. id
  local set = claimSet(m)
  local deadline = redis.call('ZSCORE', set, ref)
  if not deadline or tonumber(deadline) <= now then return nil end
  return id, m, ref, set
end

-- nextDue is µs until the next delayed message is due or claim with attempts
-- left expires (what can make a message ready); 0: none.
local function nextDue()
  local due = 0
  for _, k in ipairs({KEYS[1], KEYS[2]}) do
    local _, d = firstIn(k, '(' .. s(now), '+inf')
    if d and (due == 0 or d < due) then due = d end
  end
  if due == 0 then return 0 end
  return math.max(due - now, 1)
end

-- settle gives msg, meta and seq their lifetimes (see the top), at the end
-- of every script.
local function settle()
  if redis.call('EXISTS', KEYS[1], KEYS[2]) > 0 then
    -- The three get and lose an expiry together; seq (INCR keeps a TTL)
    -- tells whether they have one.
    if redis.call('PTTL', KEYS[10]) >= 0 then
      redis.call('PERSIST', KEYS[5])
      redis.call('PERSIST', KEYS[6])
      redis.call('PERSIST', KEYS[10])
    end
    return
  end
  local last = latest(KEYS[3])
  if last then
    expireAt(KEYS[5], last + deadTTL)
    expireAt(KEYS[6], last + deadTTL)
    expireAt(KEYS[10], last + deadTTL)
  else
    redis.call('DEL', KEYS[5], KEYS[6], KEYS[10])
  end
end
