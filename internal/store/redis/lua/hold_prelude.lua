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

-- The keys the script found with content (so with a TTL), for keep().
local seen = {}

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
  seen[1] = true
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
    for i, k in ipairs(metaFields) do
      M[k] = v[i] or nil
      if v[i] then seen[9] = true end
    end
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
local function mayQueue()
  if meta('seq') == nil then return false end
  seen[5], seen[6], seen[7] = true, true, true -- written together with seq
  return true
end

-- Physical expiry: a script notes (need) how long what it wrote must last,
-- per key, and keep() applies it on its way out, only ever lengthening a
-- key's TTL (PEXPIRE NX for a key it created, else GT). Every key but the
-- fence counter gets a TTL in the script that creates it, so a key ends
-- when the last content that needs it does. Removing content needs nothing.
-- seen notes the keys the script found with content (so with a TTL): for
-- them keep() tries GT first, for the others NX (one command either way in
-- the usual case; the other is tried when the first changes nothing).
local want = {}
local function need(i, deadline)
  if not want[i] or deadline > want[i] then want[i] = deadline end
end
local function keep()
  for i, deadline in pairs(want) do
    local ms = math.ceil((deadline - now) / 1000) + 1 + slack
    if ms < 1 then ms = 1 end
    local first, second = 'NX', 'GT'
    if seen[i] then first, second = 'GT', 'NX' end
    if redis.call('PEXPIRE', KEYS[i], s(ms), first) == 0 then redis.call('PEXPIRE', KEYS[i], s(ms), second) end
  end
  want = {}
end
-- A holder's keys must outlive its deadline by maxDelay (its lock-delay is
-- applied when it is removed); a semaphore's meta (its limit) as long, an
-- election's meta and log electionKeep longer.
-- Rounded up a step (stepUp), so that a renewal that stays within the
-- step needs no new TTL (hold_session.lua): every holder's keys last at
-- least until holderUntil(its deadline) while it is a holder, as keep()
-- only lengthens a TTL and no script empties a key that holds it.
local function holderUntil(dl) return stepUp(dl + maxDelay) end
local function holderNeed(dl, bound)
  local t = holderUntil(dl)
  need(1, t)
  need(3, t)
  if bound then need(4, t) end
  if kind == 'semaphore' then need(9, t) end
  if kind == 'election' then
    need(9, t + electionKeep)
    need(10, t + electionKeep)
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
  if n > 0 then seen[3] = true end
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

-- A ticket's info: "x|s maxHolders instance", and for a plain request (a
-- lock's or a semaphore's, without a session: it may be handed off, see
-- wake) " ttl hold tokLen token owner" after it (µs; hold 0: no max hold;
-- the token's length, then the token and the owner, which may contain
-- anything; an instance never contains a space).
local function ticketRecord(exclusive, maxHolders, inst, plain)
  local rec = (exclusive and 'x ' or 's ') .. s(maxHolders) .. ' ' .. inst
  if plain then
    rec = rec .. ' ' .. s(plain.ttl) .. ' ' .. s(plain.hold) .. ' ' .. s(#plain.tok) .. ' ' .. plain.tok .. plain.own
  end
  return rec
end
-- Returns exclusive (bool), maxHolders, instance, and the plain request
-- ({ttl, hold, tok, own}) or nil; nil for an unknown ticket.
local function ticketInfo(t)
  local info = redis.call('HGET', KEYS[7], t)
  if not info then return nil end
  local x, max, inst, rest = string.match(info, '^([xs]) (%d+) (%S+)(.*)$')
  if not x then corrupt('ticket info') end
  local plain
  if rest ~= '' then
    local ttl, hold, n, tail = string.match(rest, '^ (%d+) (%d+) (%d+) (.*)$')
    n = tonumber(n)
    if not ttl or #tail < n then corrupt('ticket info') end
    plain = {ttl = tonumber(ttl), hold = tonumber(hold), tok = string.sub(tail, 1, n), own = string.sub(tail, n + 1)}
  end
  return x == 'x', tonumber(max), inst, plain
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
  -- Without a live holder the holders' keys may have gone with the last
  -- one: keep() tries NX first.
  if live == 0 then seen[1], seen[3] = nil, nil end
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

-- fenceFloor: a grant's fence is at least the server time, or, when the
-- clock is behind the highest time this coordd has seen (timeSeen, an ARGV:
-- a failover promoted a node whose clock is behind the old master's),
-- timeSeen + 1, so that fences stay above those the old master issued and
-- lost.
local function fenceFloor(timeSeen)
  if timeSeen > now then return timeSeen + 1 end
  return now
end

-- wake lets in the tickets at the head of the queue that may be granted
-- now, in queue order, and no others (at most wakeMax): a lock's head if it
-- is exclusive and the lock is free, or the run of shared tickets at its
-- head up to the free shared places; a semaphore's first (limit - holders);
-- an election's head if it has no leader. A ticket ahead that is let in
-- but not granted here counts as a holder for those behind it. A plain
-- ticket of instance me ('': none), its lease checked, is granted here as
-- its request would have been (a hand-off, appended to handed: ticket,
-- token, fence, deadline, holders, a semaphore's limit or 0); any other is
-- woken, one publish per distinct instance. timeSeen is fenceFloor's.
local handed = {}
local function wake(me, timeSeen)
  if not mayQueue() or now < delayUntil() then return end
  local lim = 0
  if kind == 'semaphore' then lim = tonumber(meta('lim') or '0') end
  local ahead, woke, after, n = 0, {}, '-inf', 0
  while n < wakeMax do
    local page = redis.call('ZRANGEBYSCORE', KEYS[5], after, '+inf', 'WITHSCORES', 'LIMIT', 0, 8)
    if #page == 0 then return end
    for i = 1, #page, 2 do
      local t = page[i]
      after = '(' .. page[i + 1]
      n = n + 1
      local x, max, inst, plain = ticketInfo(t)
      if x == nil then return end
      local live, fits = liveCount()
      if kind == 'semaphore' then
        fits = live + ahead < lim
      elseif x then
        fits = live == 0 and ahead == 0
      else
        fits = not liveExclusive() and (max <= 0 or live + ahead < max)
      end
      if not fits then return end
      local lease = plain and inst == me and tonumber(redis.call('ZSCORE', KEYS[6], t) or '0')
      if lease and lease > now then
        local hold = 0
        if plain.hold > 0 then hold = now + plain.hold end
        local deadline = now + plain.ttl
        if hold > 0 and hold < deadline then deadline = hold end
        local r = grant(plain.tok, plain.own, '', deadline, hold, not x, 0, fenceFloor(timeSeen), t)
        for _, v in ipairs({t, plain.tok, r.fence, deadline, liveCount(), lim}) do handed[#handed + 1] = v end
      else
        if not woke[inst] then
          woke[inst] = true
          redis.call('SPUBLISH', base .. ':w:' .. inst, '')
        end
        ahead = ahead + 1
      end
      if (x and kind ~= 'semaphore') or n >= wakeMax then return end
    end
  end
end

-- withHandoffs appends the hand-offs this call made (wake's handed) to a
-- reply: now, their number, then each one's six values.
local function withHandoffs(reply)
  reply[#reply + 1] = now
  reply[#reply + 1] = #handed / 6
  for _, v in ipairs(handed) do reply[#reply + 1] = v end
  return reply
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
