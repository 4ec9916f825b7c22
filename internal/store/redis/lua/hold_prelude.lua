-- The prelude of every hold script (hold_*.lua, election_*.lua): the state
-- of one (kind, name) — its live holders, fence counter, queue of waiting
-- tickets and meta — and the steps every kind shares: clean-up, eligibility,
-- wake-ups, removing a holder, granting. All keys share the name's hash tag.
-- KEYS[1]: holders (hash: token -> record, see enc)
-- KEYS[2]: fence counter (string; never expires)
-- KEYS[3]: holders by deadline (zset: token, score deadline µs)
-- KEYS[4]: holders by session (hash: session ID -> token)
-- KEYS[5]: tickets by arrival (zset: ticket, score arrival seq)
-- KEYS[6]: tickets by lease end (zset: ticket, score µs)
-- KEYS[7]: ticket info (hash: ticket -> "x|s maxHolders instance")
-- KEYS[8]: exclusive tickets (zset: ticket, score arrival seq)
-- KEYS[9]: meta (hash: seq (arrival counter; present while tickets may be
--          queued, deleted when the queue empties), lim (a semaphore's
--          limit), du (lock-delay end µs), lead (the leader the election's
--          log names), val (its value), rev (the election's last revision))
-- KEYS[10]: the election's log (list of changes, oldest first, at most
--           logSize; see change)
-- ARGV[3]: the name's tag base: wake-up channels are ARGV[3] .. ':w:' ..
--          instance (store.WaitTopic) and ARGV[3] .. ':ev' (store.LockTopic,
--          store.ElectionTopic), in the name's slot
-- ARGV[4]: kind: 'lock', 'semaphore' or 'election'
local kind, base = ARGV[4], ARGV[3]
-- Bounds of one call's work (design-11: clean-up batches, wake targets).
local cleanBatch, wakeMax, logSize, maxWaiters = 100, 64, 64, 10000
-- store.MaxLockDelay µs: records outlive their deadline by it, so that a
-- lock-delay is never forgotten because a key expired.
local maxDelay = 60000000
-- How long an election's meta and log outlive its last holder or ticket, so
-- that its revisions do not start over for observers that come back.
local electionKeep = 86400000000

-- A holder's record: "fence deadline hold acquired shared delay sesLen
-- session owner" (µs; hold 0: no max hold; shared 0/1; the session ID's
-- length, then the ID and the owner label, which may contain anything).
local function enc(r)
  return s(r.fence) .. ' ' .. s(r.dl) .. ' ' .. s(r.hold) .. ' ' .. s(r.acq) .. ' ' ..
    (r.shared and '1' or '0') .. ' ' .. s(r.delay) .. ' ' .. s(#r.ses) .. ' ' .. r.ses .. r.own
end
local function dec(rec)
  local f, dl, hold, acq, sh, delay, n, rest =
    string.match(rec, '^(%d+) (%d+) (%d+) (%d+) ([01]) (%d+) (%d+) (.*)$')
  if not f then corrupt('holder record') end
  n = tonumber(n)
  return {fence = tonumber(f), dl = tonumber(dl), hold = tonumber(hold), acq = tonumber(acq),
    shared = sh == '1', delay = tonumber(delay), ses = string.sub(rest, 1, n), own = string.sub(rest, n + 1)}
end
local function holder(tok)
  local rec = redis.call('HGET', KEYS[1], tok)
  if not rec then return nil end
  return dec(rec)
end
-- Meta's small fields, read once (one HMGET) and kept in step with the
-- script's writes (setMeta); val, which may be large, is read apart.
local metaFields = {'seq', 'lim', 'du', 'lead', 'rev'}
local M
local function meta(f)
  if f == 'val' then return redis.call('HGET', KEYS[9], f) end
  if not M then
    M = {}
    local v = redis.call('HMGET', KEYS[9], unpack(metaFields))
    for i, k in ipairs(metaFields) do M[k] = v[i] or nil end
  end
  return M[f]
end
-- setMeta notes a meta write (v nil: deleted).
local function setMeta(f, v)
  meta(f)
  M[f] = v
end
local function delayUntil() return tonumber(meta('du') or '0') end
-- Whether tickets may be queued: meta's seq is there from the first
-- ticket's arrival until a script finds the queue empty.
local function mayQueue() return meta('seq') ~= nil end

-- Physical expiry: a script notes (need) how long what it wrote must last,
-- per key, and keep() applies it on its way out, only ever lengthening a
-- key's TTL (PEXPIRE NX for a key it created, else GT). Every key but the
-- fence counter gets a TTL in the script that creates it, so a key ends
-- when the last content that needs it does. Removing content needs nothing.
local want = {}
local function need(i, deadline)
  if not want[i] or deadline > want[i] then want[i] = deadline end
end
local function keep()
  for i, deadline in pairs(want) do
    local ms = math.ceil((deadline - now) / 1000) + 1 + slack
    if ms < 1 then ms = 1 end
    if redis.call('PEXPIRE', KEYS[i], s(ms), 'NX') == 0 then redis.call('PEXPIRE', KEYS[i], s(ms), 'GT') end
  end
  want = {}
end
-- A holder's keys must outlive its deadline by maxDelay (its lock-delay is
-- applied when it is removed); a semaphore's meta (its limit) as long, an
-- election's meta and log electionKeep longer.
local function holderNeed(dl, bound)
  need(1, dl + maxDelay)
  need(3, dl + maxDelay)
  if bound then need(4, dl + maxDelay) end
  if kind == 'semaphore' then need(9, dl + maxDelay) end
  if kind == 'election' then
    need(9, dl + maxDelay + electionKeep)
    need(10, dl + maxDelay + electionKeep)
  end
end
-- A ticket's keys (and meta's seq) must last until its lease ends.
local function ticketNeed(lease, exclusive)
  for _, i in ipairs({5, 6, 7, 9}) do need(i, lease) end
  if exclusive then need(8, lease) end
  if kind == 'election' then
    need(9, lease + electionKeep)
    need(10, lease + electionKeep)
  end
end

-- The holders by deadline, as far as clean() read them: liveN the number
-- of live ones (nil: not known), firstTok the first live one's token (false:
-- none; nil: not known). Scripts that change holders keep them in step.
local liveN, firstTok
local function liveCount()
  if not liveN then liveN = redis.call('ZCOUNT', KEYS[3], '(' .. s(now), '+inf') end
  return liveN
end
-- The live holder whose deadline comes first (token, record), or nil.
local function firstLive()
  if firstTok == nil then
    local t = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. s(now), '+inf', 'LIMIT', 0, 1)
    firstTok = t[1] or false
  end
  if not firstTok then return nil end
  return firstTok, holder(firstTok)
end
-- Whether a live holder is exclusive: one is always the only live holder
-- (it is granted only when there is none, and nothing is granted beside it).
local function liveExclusive()
  if liveCount() ~= 1 then return false end
  local _, r = firstLive()
  return r ~= nil and not r.shared
end

-- An election's change: the next revision, in the log (the oldest dropped
-- beyond logSize), waking the observers. lead nil: no leader. An entry is
-- "rev has fence elected expires value".
local function change(lead, r, value)
  local rev = redis.call('HINCRBY', KEYS[9], 'rev', 1)
  setMeta('rev', s(rev))
  local e
  if lead then
    redis.call('HSET', KEYS[9], 'lead', lead, 'val', value)
    setMeta('lead', lead)
    e = s(rev) .. ' 1 ' .. s(r.fence) .. ' ' .. s(r.acq) .. ' ' .. s(r.dl) .. ' ' .. value
  else
    redis.call('HDEL', KEYS[9], 'lead', 'val')
    setMeta('lead', nil)
    e = s(rev) .. ' 0 0 0 0 '
  end
  redis.call('RPUSH', KEYS[10], e)
  redis.call('LTRIM', KEYS[10], -logSize, -1)
  redis.call('SPUBLISH', base .. ':ev', '')
  need(9, now + electionKeep)
  need(10, now + electionKeep)
  return rev
end

-- removeHolder deletes holder tok (record r). One that has expired, bound to
-- a session with a lock-delay, and ended by its session (not its max hold)
-- keeps the name from everyone until its deadline + the delay. A leader's
-- removal is logged (no leader).
local function removeHolder(tok, r)
  redis.call('HDEL', KEYS[1], tok)
  redis.call('ZREM', KEYS[3], tok)
  if r.dl > now then
    if liveN then liveN = liveN - 1 end
    firstTok = nil
  end
  if r.ses ~= '' and redis.call('HGET', KEYS[4], r.ses) == tok then redis.call('HDEL', KEYS[4], r.ses) end
  if r.dl <= now and r.ses ~= '' and r.delay > 0 and (r.hold == 0 or r.dl < r.hold) then
    if r.dl + r.delay > delayUntil() then
      redis.call('HSET', KEYS[9], 'du', s(r.dl + r.delay))
      setMeta('du', s(r.dl + r.delay))
      need(9, r.dl + r.delay)
    end
  end
  if kind == 'election' and meta('lead') == tok then change(nil) end
end

-- dropTicket takes ticket t out of the queue. When the queue is left
-- empty, meta's seq goes too (see mayQueue); the arrival order starts over
-- with the next ticket.
local function dropTicket(t)
  local was = redis.call('ZREM', KEYS[5], t)
  redis.call('ZREM', KEYS[6], t)
  redis.call('ZREM', KEYS[8], t)
  redis.call('HDEL', KEYS[7], t)
  if was == 1 and redis.call('ZCARD', KEYS[5]) == 0 then
    redis.call('HDEL', KEYS[9], 'seq')
    setMeta('seq', nil)
  end
end

-- clean removes up to cleanBatch expired holders and as many lapsed
-- tickets; an election whose logged leader is gone gets its "no leader".
-- Returns whether it removed anything (someone may be let in).
-- The first few holders by deadline tell, in the usual case, everything:
-- the expired ones, the live count and the first live one.
local headN = 4
local function clean()
  local any = false
  local z = redis.call('ZRANGE', KEYS[3], 0, headN - 1, 'WITHSCORES')
  local n, gone = #z / 2, {}
  for i = 1, n do
    if tonumber(z[2 * i]) > now then
      if firstTok == nil then firstTok = z[2 * i - 1] end
    else
      gone[#gone + 1] = z[2 * i - 1]
    end
  end
  if n < headN then
    liveN = n - #gone
    if firstTok == nil then firstTok = false end
  elseif #gone == headN then
    gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', s(now), 'LIMIT', 0, cleanBatch)
  end
  for i = 1, #gone do
    local r = holder(gone[i])
    if r then removeHolder(gone[i], r) else redis.call('ZREM', KEYS[3], gone[i]) end
    any = true
  end
  if mayQueue() then
    local lapsed = redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', s(now), 'LIMIT', 0, cleanBatch)
    for i = 1, #lapsed do
      dropTicket(lapsed[i])
      any = true
    end
  end
  if kind == 'election' then
    local lead = meta('lead')
    if lead and not redis.call('HEXISTS', KEYS[1], lead) then change(nil) any = true end
  end
  return any
end

-- A ticket's info: exclusive (bool), maxHolders, instance.
local function ticketInfo(t)
  local info = redis.call('HGET', KEYS[7], t)
  if not info then return nil end
  local x, max, inst = string.match(info, '^([xs]) (%d+) (.*)$')
  if not x then corrupt('ticket info') end
  return x == 'x', tonumber(max), inst
end
-- A live ticket's arrival seq, or nil (not queued, or lapsed).
local function ticketSeq(t)
  if t == '' or not mayQueue() then return nil end
  local lease = redis.call('ZSCORE', KEYS[6], t)
  if not lease or tonumber(lease) <= now then return nil end
  return tonumber(redis.call('ZSCORE', KEYS[5], t))
end
-- Tickets ahead of seq (nil: behind the whole queue) in zset key.
local function ahead(key, seq)
  if not mayQueue() then return 0 end
  if seq then return redis.call('ZCOUNT', key, '-inf', '(' .. s(seq)) end
  return redis.call('ZCARD', key)
end

-- fits: whether a request fits beside the live holders (ignoring the
-- queue); eligible: whether it fits and no ticket ahead is blocked by it.
local function fits(shared, maxHolders, limit)
  if kind == 'semaphore' then return liveCount() < limit end
  if not shared then return liveCount() == 0 end
  if liveExclusive() then return false end
  return maxHolders <= 0 or liveCount() < maxHolders
end
local function eligible(shared, maxHolders, limit, seq)
  if now < delayUntil() then return false end
  if not fits(shared, maxHolders, limit) then return false end
  if kind == 'semaphore' then return liveCount() + ahead(KEYS[5], seq) < limit end
  if shared then return ahead(KEYS[8], seq) == 0 end
  return ahead(KEYS[5], seq) == 0
end

-- wake publishes once to the wake-up channel of each distinct instance
-- among the tickets that may be granted now (at most wakeMax): a lock's head
-- if exclusive and the lock is free, or the run of shared tickets at its
-- head up to the free shared places; a semaphore's first (limit - holders);
-- an election's head if it has no leader. Nothing to anyone else.
local function wake()
  if not mayQueue() or now < delayUntil() then return end
  local n = 0
  if kind == 'semaphore' then
    n = tonumber(meta('lim') or '0') - liveCount()
  elseif not liveExclusive() then
    n = wakeMax
  end
  if n <= 0 then return end
  if n > wakeMax then n = wakeMax end
  local ts = redis.call('ZRANGE', KEYS[5], 0, n - 1)
  local seen, live = {}, liveCount()
  for i = 1, #ts do
    local x, max, inst = ticketInfo(ts[i])
    if x == nil then break end
    if kind ~= 'semaphore' then
      if x then
        if i > 1 or live > 0 then break end
      else
        if max > 0 and live + i > max then break end
      end
    end
    if not seen[inst] then
      seen[inst] = true
      redis.call('SPUBLISH', base .. ':w:' .. inst, '')
    end
    if kind ~= 'semaphore' and x then break end
  end
end

-- grant makes tok a holder until deadline (the fence rule: max(counter + 1,
-- floor)); its ticket, if queued, leaves the queue. Returns the record.
local function grant(tok, owner, ses, deadline, hold, shared, delay, floor, ticket)
  -- Usually the floor is above the counter: one SET, which answers the
  -- old value; a second SET when the counter was at or above it.
  local fence = floor
  local old = tonumber(redis.call('SET', KEYS[2], s(floor), 'GET') or '0')
  if old + 1 > fence then
    fence = old + 1
    redis.call('SET', KEYS[2], s(fence))
  end
  local r = {fence = fence, dl = deadline, hold = hold, acq = now, shared = shared, delay = delay, ses = ses, own = owner}
  local live = liveCount()
  redis.call('HSET', KEYS[1], tok, enc(r))
  redis.call('ZADD', KEYS[3], s(deadline), tok)
  if ses ~= '' then redis.call('HSET', KEYS[4], ses, tok) end
  holderNeed(deadline, ses ~= '')
  liveN, firstTok = live + 1, nil
  if ticket ~= '' and mayQueue() then dropTicket(ticket) end
  return r
end

-- setDeadline moves holder tok (record r) to deadline.
local function setDeadline(tok, r, deadline)
  r.dl = deadline
  redis.call('HSET', KEYS[1], tok, enc(r))
  redis.call('ZADD', KEYS[3], s(deadline), tok)
  holderNeed(deadline, r.ses ~= '')
  firstTok = nil
end

-- leaderInfo is an election's current leader: {has (0/1), value, fence,
-- elected µs, deadline µs, rev}.
local function leaderInfo()
  local rev = tonumber(meta('rev') or '0')
  local lead = meta('lead')
  local r = lead and holder(lead)
  if r and r.dl > now then return {1, meta('val') or '', r.fence, r.acq, r.dl, rev} end
  return {0, '', 0, 0, 0, rev}
end
