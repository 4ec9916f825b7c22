-- The prelude of every queue script, after the common one. A queue's keys,
-- all under the queue's hash tag (keys.go, queueKeyParts):
-- kPending    sorted set of refs by due time µs: delayed messages,
--             made ready (moved to ready) once due
-- kInflight   sorted set of refs by claim deadline µs, for claims
--             with attempts left: ready again from the deadline on
-- kLast       sorted set of refs by claim deadline µs, for claims on
--             the message's last attempt: dead from the deadline on
-- kDead       sorted set of the dead letters' refs by when each died
--             µs; forgotten dead-letter ttl after that
-- kMsg        hash: message ID -> the encoded message (codec.go), of
--             the messages in pending, ready, inflight, last and
--             gwait
-- kMeta       hash: message ID -> its meta record (metaString)
-- kDeadMsg    hash: a dead letter's ID -> its meta, "\n", the
--             encoded message
-- kDeadPrev   hash: a dead letter's ID -> its meta, "\n", its payload's
--             size, "\n", the start of its encoded message (the version
--             byte and up to MAXPREVIEW bytes of payload), for
--             ListDeadLetters, which then reads no whole payload (dead
--             letters that died before it was kept have none)
-- kDedup      hash: dedup ID -> "message ID|deliver µs"
-- kDedupExp   sorted set of dedup IDs by expiry µs
-- kSeq        the enqueue counter
-- kReady      sorted set of the ready messages: by priority, highest
--             first, then by the time they became due (makeReady)
-- kGroupHeads hash: group -> the ref of its message that is in
--             pending, ready or a claim (its head: one at a time)
-- kGroupWait  sorted set (by member, scores 0) of "group\0ref": each
--             group's messages behind its head, in enqueue order
-- kConf      hash: the queue's settings (store.QueueSettings), no expiry,
--             none when they are all unset: p paused ("1"), max
--             MaxInFlight, rl RateLimit, rp RatePeriod µs, tat the claim
--             rate's theoretical arrival time µs (rateTake)
-- The arguments every queue script starts with (queueArgs in queue.go):
-- deadTTL, the dead-letter ttl µs, and wakeChannel, the queue's wake-up
-- channel.
--
-- A ref is the message's sequence number (16 hex digits) followed by its
-- ID, so that messages due at the same instant keep their enqueue order.
-- A message is ready once it is in ready, or due in pending or inflight
-- (made ready by the next upkeep); Claim takes from ready, the highest
-- priority first, then in the order they became due (a message whose
-- group's turn came, when it came). A message of a group is only ever in pending,
-- ready or a claim while it is its group's head: the others wait in gwait,
-- and the next becomes head (pending or ready, as its deliver time says)
-- when the head is acked or dies. Counts come from scores (ZCOUNT, ZCARD),
-- never from how far an upkeep got.
--
-- Lifetimes: while the queue has a message in pending, inflight, ready or
-- gwait, msg, meta, seq and gheads have no expiry (they hold live messages
-- only, and Redis deletes them when empty); with only claims on a last
-- attempt left, they expire with the last of those (its deadline + the
-- dead-letter ttl); with no message left, they are deleted (a new seq only
-- has to order new messages). That is settle, at the end of every script
-- (Enqueue, which has just added a live message, only persists).
-- last and dead expire dead-letter ttl after their latest score, deadmsg
-- with dead, dedup and dedupexp at their latest expiry, set whenever one
-- gets a member. So the records of a queue nobody touches again end by
-- themselves; upkeep deletes the ended ones of a queue in use, in bounded
-- batches.
local BATCH = 1000
-- MAXPREVIEW is store.MaxDeadPreview: the most payload bytes
-- ListDeadLetters returns of a dead letter.
local MAXPREVIEW = 4096

-- A meta record starts with its version, so that a record of another
-- version (or none: the unversioned records before it) is never misread:
-- "v2|seq|attempt|max attempts|deliver µs|enqueue µs|priority|group
-- length|" then the group and the receipt; "v1|seq|attempt|max|deliver|
-- enqueue|receipt", of messages enqueued before v2, is read as priority 0
-- and no group. The version is a letter and a number, and a record without
-- it starts with the seq's 16 hex digits, which no version matches.
local function metaString(m)
  return 'v2|' .. m.seq .. '|' .. s(m.attempt) .. '|' .. s(m.max) .. '|' .. s(m.deliver) .. '|' ..
    s(m.enqueued) .. '|' .. s(m.prio) .. '|' .. s(#m.group) .. '|' .. m.group .. m.receipt
end

local function parseMeta(r)
  local v, seq, attempt, max, deliver, enqueued, rest =
    string.match(r, '^(%w+)|(%x+)|(%d+)|(%d+)|(%d+)|(%d+)|(.*)$')
  local m = {seq = seq, attempt = tonumber(attempt), max = tonumber(max), deliver = tonumber(deliver),
    enqueued = tonumber(enqueued), prio = 0, group = '', receipt = rest}
  if v == 'v2' then
    local prio, n, tail = string.match(rest, '^(%d)|(%d+)|(.*)$')
    n = tonumber(n)
    if not prio or #tail < n then corrupt('queue meta record') end
    m.prio, m.group, m.receipt = tonumber(prio), string.sub(tail, 1, n), string.sub(tail, n + 1)
  elseif v ~= 'v1' then
    corrupt('queue meta record')
  end
  return m
end

-- getMeta returns the meta of message id, or nil if there is none.
local function getMeta(id)
  local m = redis.call('HGET', kMeta, id)
  if not m then return nil end
  return parseMeta(m)
end

-- body returns the encoded message of a message in pending, inflight or
-- last, which has one.
local function body(id)
  local b = redis.call('HGET', kMsg, id)
  if not b then corrupt('queue message record missing') end
  return b
end

local function setMeta(id, m)
  redis.call('HSET', kMeta, id, metaString(m))
end

local function nextSeq()
  return string.format('%016x', redis.call('INCR', kSeq))
end

-- makeReady puts ref (message meta m), due at due µs, in ready: by its
-- priority, highest first (0 to 9), then by due time, then enqueue order.
-- The score holds the priority and the due time in milliseconds (below
-- 2^42 ms until the year 2109: the score stays an exact double); the
-- member starts with the due time's microseconds within that millisecond,
-- so that equal scores sort by them, then by ref (readyRef).
local function readyMember(ref, due)
  return string.format('%03d', due - math.floor(due / 1000) * 1000) .. ref
end
local function makeReady(ref, m, due)
  redis.call('ZADD', kReady, s((9 - m.prio) * 4398046511104 + math.floor(due / 1000)), readyMember(ref, due))
end

-- readyRef is the ref of a ready member.
local function readyRef(member) return string.sub(member, 4) end

-- place puts ref (meta m) where its deliver time says, as if it became
-- ready at ready µs (now, or its deliver time): ready, or pending.
local function place(ref, m, ready)
  if m.deliver <= now then
    makeReady(ref, m, ready)
  else
    redis.call('ZADD', kPending, s(m.deliver), ref)
  end
end

-- advance ends the turn of group's head: the next message of the group,
-- if any, becomes its head and is placed (the caller wakes the queue if
-- it says so: true when a message became ready).
local function advance(group)
  local nx = redis.call('ZRANGEBYLEX', kGroupWait, '[' .. group .. '\0', '(' .. group .. '\1', 'LIMIT', 0, 1)
  if #nx == 0 then
    redis.call('HDEL', kGroupHeads, group)
    return false
  end
  redis.call('ZREM', kGroupWait, nx[1])
  local ref = string.sub(nx[1], #group + 2)
  local id = string.sub(ref, 17)
  local m = redis.call('HGET', kMeta, id)
  if not m then corrupt('queue meta record missing') end
  m = parseMeta(m)
  redis.call('HSET', kGroupHeads, group, ref)
  if m.deliver < now then
    m.deliver = now -- claimable from its turn on
    setMeta(id, m)
  end
  place(ref, m, now)
  return m.deliver <= now
end

-- claimSet is the set that holds a claim of m: last on its last attempt.
local function claimSet(m)
  if m.attempt >= m.max then return kLast end
  return kInflight
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
  expireAt(kLast, latest(kLast) + deadTTL)
end
local function expireDead()
  local at = latest(kDead) + deadTTL
  expireAt(kDead, at)
  expireAt(kDeadMsg, at)
  expireAt(kDeadPrev, at)
end
local function expireDedup()
  local at = latest(kDedupExp)
  expireAt(kDedup, at)
  expireAt(kDedupExp, at)
end

-- bury makes the message of a claim that ended (already removed from last,
-- or removed after it) a dead letter since at, or forgets it if its
-- dead-letter ttl has passed: its meta m may be nil then, since its records
-- expire with it (settle), but not before. Its group, if any, moves on.
-- Returns whether a message became ready (advance).
local function bury(id, m, ref, at)
  if at + deadTTL <= now then
    redis.call('HDEL', kMsg, id)
    redis.call('HDEL', kMeta, id)
    if m and m.group ~= '' then return advance(m.group) end
    return false
  end
  if not m then corrupt('queue meta record missing') end
  local b = body(id)
  redis.call('HDEL', kMsg, id)
  redis.call('HDEL', kMeta, id)
  m.receipt = ''
  redis.call('HSET', kDeadMsg, id, metaString(m) .. '\n' .. b)
  redis.call('HSET', kDeadPrev, id, metaString(m) .. '\n' .. s(#b - 1) .. '\n' .. string.sub(b, 1, 1 + MAXPREVIEW))
  redis.call('ZADD', kDead, s(at), ref)
  expireDead()
  if m.group ~= '' then return advance(m.group) end
  return false
end

-- revive makes a dead letter (out of dead or last already, its records
-- read: meta m and encoded message b) ready now, as if enqueued now: its
-- attempts reset, a new place in the enqueue order (a message of a group
-- goes behind the group's messages, or is its head if it has none).
local function revive(id, m, b)
  m.attempt, m.receipt, m.seq, m.enqueued = 0, '', nextSeq(), now
  setMeta(id, m)
  redis.call('HSET', kMsg, id, b)
  local ref = m.seq .. id
  if m.group == '' or redis.call('HSETNX', kGroupHeads, m.group, ref) == 1 then
    makeReady(ref, m, now)
  else
    redis.call('ZADD', kGroupWait, 0, m.group .. '\0' .. ref)
  end
end

-- forgetDead deletes dead letter id's records.
local function forgetDead(id)
  redis.call('HDEL', kDeadMsg, id)
  redis.call('HDEL', kDeadPrev, id)
end

-- deadRecord reads dead letter id's record (deadmsg): its meta and its
-- encoded message; nil if it has none.
local function deadRecord(id)
  local rec = redis.call('HGET', kDeadMsg, id)
  if not rec then return nil end
  local nl = string.find(rec, '\n', 1, true)
  if not nl then corrupt('queue dead letter record') end
  return parseMeta(string.sub(rec, 1, nl - 1)), string.sub(rec, nl + 1)
end

-- endLast takes a claim that ended on its last attempt (ref, of meta m)
-- out of last; if it was its group's head, the group moves on. Returns
-- true when that made a message ready (the caller wakes the queue).
local function endLast(ref, m)
  redis.call('ZREM', kLast, ref)
  if m.group ~= '' and redis.call('HGET', kGroupHeads, m.group) == ref then
    return advance(m.group)
  end
  return false
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

-- upkeep moves and deletes what has come due or ended, at most BATCH of
-- each kind, and only looks further where something has: delayed messages
-- that came due and claims with attempts left that expired are made ready
-- (as of when they came due); claims that ended on their last attempt
-- become dead letters; dead letters past their ttl and expired dedup IDs
-- are forgotten. Reads do not depend on it: they go by scores. It wakes
-- the queue if a group's next message became ready.
local function upkeep()
  for _, key in ipairs({kPending, kInflight}) do
    local due = redis.call('ZRANGEBYSCORE', key, '-inf', s(now), 'WITHSCORES', 'LIMIT', 0, BATCH)
    for k = 1, #due, 2 do
      local ref = due[k]
      local m = getMeta(string.sub(ref, 17))
      if not m then corrupt('queue meta record missing') end
      redis.call('ZREM', key, ref) -- a claim out of inflight is no longer live (claimed)
      makeReady(ref, m, tonumber(due[k + 1]))
    end
  end
  local woke = false
  local ended = redis.call('ZRANGEBYSCORE', kLast, '-inf', s(now), 'WITHSCORES', 'LIMIT', 0, BATCH)
  for k = 1, #ended, 2 do
    local ref = ended[k]
    local id = string.sub(ref, 17)
    redis.call('ZREM', kLast, ref)
    woke = bury(id, getMeta(id), ref, tonumber(ended[k + 1])) or woke
  end
  local old = redis.call('ZRANGEBYSCORE', kDead, '-inf', s(now - deadTTL), 'LIMIT', 0, BATCH)
  for k = 1, #old do
    redis.call('ZREM', kDead, old[k])
    forgetDead(string.sub(old[k], 17))
  end
  old = redis.call('ZRANGEBYSCORE', kDedupExp, '-inf', s(now), 'LIMIT', 0, BATCH)
  for k = 1, #old do
    redis.call('HDEL', kDedup, old[k])
    redis.call('ZREM', kDedupExp, old[k])
  end
  if woke then redis.call('SPUBLISH', wakeChannel, '') end
end

-- firstIn returns the first ref of key whose score lies in [lo, hi], and its
-- score (lo, hi: ZRANGEBYSCORE bounds).
local function firstIn(key, lo, hi)
  local r = redis.call('ZRANGEBYSCORE', key, lo, hi, 'WITHSCORES', 'LIMIT', 0, 1)
  if #r == 0 then return nil end
  return r[1], tonumber(r[2])
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
  for _, k in ipairs({kPending, kInflight}) do
    local _, d = firstIn(k, '(' .. s(now), '+inf')
    if d and (due == 0 or d < due) then due = d end
  end
  if due == 0 then return 0 end
  return math.max(due - now, 1)
end

-- settle gives msg, meta, seq and gheads their lifetimes (see the top), at
-- the end of every script.
-- persist: the queue has a live message, so msg, meta, seq and gheads
-- have no expiry. They get and lose an expiry together; seq (INCR keeps a
-- TTL) tells whether they have one: one command when they have none.
local function persist()
  if redis.call('PERSIST', kSeq) == 1 then
    redis.call('PERSIST', kMsg)
    redis.call('PERSIST', kMeta)
    redis.call('PERSIST', kGroupHeads)
  end
end
local function settle()
  if redis.call('EXISTS', kPending, kInflight, kReady, kGroupWait) > 0 then
    persist()
    return
  end
  local last = latest(kLast)
  if last then
    for _, k in ipairs({kMsg, kMeta, kSeq, kGroupHeads}) do expireAt(k, last + deadTTL) end
  else
    redis.call('DEL', kMsg, kMeta, kSeq, kGroupHeads)
  end
end

-- conf reads the queue's settings (kConf): paused, max in flight, rate
-- limit, rate period µs, rate tat µs; unset ones are 0.
local function conf()
  local r = redis.call('HMGET', kConf, 'p', 'max', 'rl', 'rp', 'tat')
  return {paused = r[1] == '1', max = tonumber(r[2]) or 0, rl = tonumber(r[3]) or 0, rp = tonumber(r[4]) or 0,
    tat = tonumber(r[5]) or 0}
end

-- live is how many claims of the queue are live (not expired).
local function live()
  return redis.call('ZCOUNT', kInflight, '(' .. s(now), '+inf') + redis.call('ZCOUNT', kLast, '(' .. s(now), '+inf')
end

-- rateTake takes up to n tokens of c's claim rate (c.rl > 0), as
-- store.RateTake: how many it took, the new tat, and, when it took fewer
-- than n, µs until the next token (else 0).
local function rateTake(c, n)
  local t = c.rp / c.rl
  local tat = math.max(c.tat, now)
  local avail = math.floor((now + c.rp - tat) / t + 1e-9)
  local took = math.max(0, math.min(n, avail))
  tat = tat + took * t
  local nxt = 0
  if took < n then nxt = math.max(1, math.ceil(tat + t - c.rp - now)) end
  return took, tat, nxt
end

-- capSlots bounds want by c's pause and max in flight, with countLive()
-- the claims (or reservations) that count against it, called only under
-- a cap: how many, and the held-back code (0 none, 1 paused, 2 max in
-- flight), as Claim answers it.
local function capSlots(c, want, countLive)
  if c.paused then return 0, 1 end
  if c.max > 0 and want > 0 then
    local free = math.max(0, c.max - countLive())
    if free < want then return free, 2 end
  end
  return want, 0
end

-- capRate takes up to n of c's claim-rate tokens and keeps the bucket's
-- state: how many, and, when it took fewer, µs until the next token.
local function capRate(c, n)
  if c.rl == 0 or n == 0 then return n, 0 end
  local took, tat, nxt = rateTake(c, n)
  if took > 0 then redis.call('HSET', kConf, 'tat', string.format('%.17g', tat)) end
  return took, nxt
end

-- rateRefund is c's tat after k tokens were given back (taken for claims
-- that did not happen), never beyond a full bucket, as store.RateRefund.
local function rateRefund(c, k)
  return math.max(c.tat - k * c.rp / c.rl, math.min(c.tat, now))
end

-- wakeIfCapped wakes the queue's waiters when n claims that just ended
-- freed slots of a queue that was at its cap on claims in flight (below
-- it, no claim was held back by it).
local function wakeIfCapped(n)
  local max = tonumber(redis.call('HGET', kConf, 'max'))
  if max and live() + n >= max then redis.call('SPUBLISH', wakeChannel, '') end
end
