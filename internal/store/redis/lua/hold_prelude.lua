-- The prelude of every hold script (hold_*.lua, election_*.lua): the state
-- of one (kind, name) — its live holders, fence counter, queue of waiting
-- tickets and meta — and the steps every kind shares: clean-up, eligibility,
-- wake-ups, removing a holder, granting. All keys share the name's hash tag
-- (keys.go, holdKeyParts):
-- kHolders: holders (hash: token -> record, see enc), but a lock's solo
--           holder (see solo)
-- kByDeadline: holders by deadline (zset: token, score deadline µs)
-- kBySession: holders by session (hash: session ID -> token)
-- kTickets: tickets by arrival (zset: ticket, score arrival seq)
-- kTicketLeases: tickets by lease end (zset: ticket, score µs)
-- kTicketInfo: ticket info (hash: ticket -> "x|s maxHolders instance")
-- kExclusive: exclusive tickets (zset: ticket, score arrival seq)
-- kMeta: meta (hash: f (the fence counter: meta lasts idleTTL after the
--        last grant), seq (arrival counter; present while tickets may be
--        queued, deleted when the queue empties), lim (a semaphore's
--        limit), du (lock-delay end µs), lead (the leader the election's
--        log names), val (its value), rev (the election's last revision),
--        ht and hr (a lock's solo holder's token and record, see solo),
--        x (a lock's holder keys may hold holders, see keyed))
-- kLog: the election's log (list of changes, oldest first, at most
--       logSize; see change)
-- The arguments every hold script starts with (holdArgs in holds.go):
-- base, the name's tag base: its wake-up channels are base .. ':w:' ..
-- instance (store.WaitTopic) and base .. ':ev' (store.ElectionTopic), in
-- the name's slot; kind: 'lock', 'semaphore' or 'election'; idleTTL µs
-- (redis.idle_name_ttl): how long the fence counter outlives the name's
-- last grant, and an election's revision and log its last leader or ticket;
-- facts: what coordd learnt from the sessions of holders an earlier run of
-- the script asked about (resolve), "token live deadline" triples.
-- Bounds of one call's work: clean-up batches, wake targets, log size, queue.
local cleanBatch, wakeMax, logSize, maxWaiters = 100, 64, 64, 10000

-- The keys the script found with content (so with a TTL), for keep().
local seen = {}
-- The head of the holders by deadline as resolve read it (ZRANGE WITHSCORES),
-- for clean to use instead of reading it again; nil once anything changed
-- the holders by deadline (but a removal from a head that held them all).
-- settled: the tokens whose records resolve changed.
local headCache
local headN = 4
local settled = {}

-- Meta's small fields, read once (one HMGET) and kept in step with the
-- script's writes (setMeta); val, which may be large, is read apart.
local metaFields = {'f', 'seq', 'lim', 'du', 'lead', 'rev', 'ht', 'hr', 'x'}
local M
local function meta(f)
  if f == 'val' then return redis.call('HGET', kMeta, f) end
  if not M then
    M = {}
    local v = redis.call('HMGET', kMeta, unpack(metaFields))
    for i, k in ipairs(metaFields) do
      M[k] = v[i] or nil
      if v[i] then seen[kMeta] = true end
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
  seen[kTickets], seen[kTicketLeases], seen[kTicketInfo] = true, true, true -- written together with seq
  return true
end

-- keyed: whether the holder keys may hold holders. Always for a semaphore
-- or an election; a lock's meta has x from its first such holder's grant
-- (written with the fence) until a clean-up finds the keys empty, and
-- outlives its holders (holderNeed), so that an uncontended lock reads
-- nothing but its meta.
local function keyed()
  return kind ~= 'lock' or meta('x') ~= nil
end

-- The common case, a lock's plain exclusive holder (no session, not
-- shared), is kept in meta beside the fence counter (fields ht: its token,
-- hr: its record), so that an uncontended lock and its release touch one
-- key. It is the only holder: the holder keys are empty while it is there
-- (it is granted only with no live holder, after clean() removed the
-- expired ones, and nothing is granted beside it; clean() removes it once
-- it has expired, before anything else can be granted). solo returns its
-- token and record (r.solo set), or nil.
local function solo()
  if kind ~= 'lock' then return nil end
  local t = meta('ht')
  if not t then return nil end
  local r = dec(meta('hr'))
  r.solo = true
  return t, r
end
local function holder(tok)
  local st, sr = solo()
  if st then
    if st == tok then return sr end
    return nil
  end
  if not keyed() then return nil end
  local rec = redis.call('HGET', kHolders, tok)
  if not rec then return nil end
  seen[kHolders] = true
  return dec(rec)
end
-- holderRecords: every holder's record, live or expired and not yet
-- cleaned up (at most the kind's bound plus those).
local function holderRecords()
  local _, sr = solo()
  if sr then return {sr} end
  local out = {}
  if not keyed() then return out end
  for _, rec in ipairs(redis.call('HVALS', kHolders)) do out[#out + 1] = dec(rec) end
  return out
end

-- Physical expiry: a script notes (need) how long what it wrote must last,
-- per key, and keep() applies it on its way out, only ever lengthening a
-- key's TTL (PEXPIRE NX for a key it created, else GT). Every key gets a
-- TTL in the script that creates it, so a key ends when the last content
-- that needs it does. Removing content needs nothing. So a name nobody
-- holds, waits for or keeps a lock-delay on has no keys left once its
-- fence counter ends, idleTTL after its last grant (grant sets it).
-- seen notes the keys the script found with content (so with a TTL): for
-- them keep() tries GT first, for the others NX (one command either way in
-- the usual case; the other is tried when the first changes nothing).
local want = {}
local function need(i, deadline)
  if not want[i] or deadline > want[i] then want[i] = deadline end
end
-- removed: the script removed a holder or a ticket, so the name may have
-- become idle (settleIdle).
local removed = false
-- settleIdle: a name left with no holder records, no tickets and no
-- lock-delay is idle. A semaphore forgets its limit (it binds only holders
-- and tickets); an election's meta and log end idleTTL from now, however
-- long its last holder's needed them. (A lock's holder keys are empty,
-- so gone, already.)
local function settleIdle()
  if kind == 'lock' or not removed or mayQueue() or delayUntil() > now or redis.call('EXISTS', kByDeadline) == 1 then
    return
  end
  if kind == 'semaphore' then
    if meta('lim') then
      redis.call('HDEL', kMeta, 'lim')
      setMeta('lim', nil)
    end
    return
  end
  local ms = s(math.ceil(idleTTL / 1000) + 1 + slack)
  redis.call('PEXPIRE', kMeta, ms)
  redis.call('PEXPIRE', kLog, ms)
end
local function keep()
  for key, deadline in pairs(want) do
    local ms = math.ceil((deadline - now) / 1000) + 1 + slack
    if ms < 1 then ms = 1 end
    local first, second = 'NX', 'GT'
    if seen[key] then first, second = 'GT', 'NX' end
    if redis.call('PEXPIRE', key, s(ms), first) == 0 then redis.call('PEXPIRE', key, s(ms), second) end
  end
  want = {}
  settleIdle()
end
-- A holder's keys must outlive its deadline by its lock-delay (applied
-- when it is removed); a semaphore's meta (its limit) as long, an
-- election's meta and log idleTTL longer, so that its revisions do not
-- start over for observers that come back within that.
-- Rounded up a step (stepUp), so that a renewal that stays within the
-- step needs no new TTL (hold_session.lua): every holder's keys last at
-- least until holderUntil(its deadline, its delay) while it is a holder, as
-- keep() only lengthens a TTL and no script empties a key that holds it.
-- A session-bound holder's keys last keepFor (an argument: the session's
-- horizon beyond its deadline, 0 where the caller renews nothing) longer,
-- since its session lives on without renewing it (resolve; the session's
-- heartbeats renew its holds only as that horizon nears).
local function holderUntil(dl, delay, bound)
  if bound then return stepUp(dl + delay + keepFor) end
  return stepUp(dl + delay)
end
local function holderNeed(dl, bound, delay)
  local t = holderUntil(dl, delay, bound)
  need(kHolders, t)
  need(kByDeadline, t)
  if bound then need(kBySession, t) end
  if kind ~= 'election' then need(kMeta, t) end -- a semaphore's limit, a lock's x
  if kind == 'election' then
    need(kMeta, t + idleTTL)
    need(kLog, t + idleTTL)
  end
end
-- A ticket's keys (and meta's seq) must last until its lease ends.
local function ticketNeed(lease, exclusive)
  for _, k in ipairs({kTickets, kTicketLeases, kTicketInfo, kMeta}) do need(k, lease) end
  if exclusive then need(kExclusive, lease) end
  if kind == 'election' then
    need(kMeta, lease + idleTTL)
    need(kLog, lease + idleTTL)
  end
end

-- The holders by deadline, as far as clean() read them: liveN the number
-- of live ones (nil: not known), firstTok the first live one's token (false:
-- none; nil: not known). Scripts that change holders keep them in step.
local liveN, firstTok
local function liveCount()
  if not liveN then
    local _, sr = solo()
    if sr then
      liveN = sr.dl > now and 1 or 0
    elseif not keyed() then
      liveN = 0
    else
      liveN = redis.call('ZCOUNT', kByDeadline, '(' .. s(now), '+inf')
    end
  end
  return liveN
end
-- The live holder whose deadline comes first (token, record), or nil.
local function firstLive()
  if firstTok == nil then
    local st, sr = solo()
    if sr then
      firstTok = sr.dl > now and st
    elseif not keyed() then
      firstTok = false
    else
      local t = redis.call('ZRANGEBYSCORE', kByDeadline, '(' .. s(now), '+inf', 'LIMIT', 0, 1)
      firstTok = t[1] or false
    end
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
  local rev = redis.call('HINCRBY', kMeta, 'rev', 1)
  setMeta('rev', s(rev))
  local e
  if lead then
    redis.call('HSET', kMeta, 'lead', lead, 'val', value)
    setMeta('lead', lead)
    e = s(rev) .. ' 1 ' .. s(r.fence) .. ' ' .. s(r.acq) .. ' ' .. s(r.dl) .. ' ' .. value
  else
    redis.call('HDEL', kMeta, 'lead', 'val')
    setMeta('lead', nil)
    e = s(rev) .. ' 0 0 0 0 '
  end
  redis.call('RPUSH', kLog, e)
  redis.call('LTRIM', kLog, -logSize, -1)
  redis.call('SPUBLISH', base .. ':ev', '')
  need(kMeta, now + idleTTL)
  need(kLog, now + idleTTL)
  return rev
end

-- removeHolder deletes holder tok (record r). One that has expired, bound to
-- a session with a lock-delay, and ended by its session (not its max hold)
-- keeps the name from everyone until its deadline + the delay. A leader's
-- removal is logged (no leader).
local function removeHolder(tok, r)
  removed = true
  if r.solo then
    redis.call('HDEL', kMeta, 'ht', 'hr')
    setMeta('ht', nil)
    setMeta('hr', nil)
    liveN, firstTok = 0, false -- it was the only holder
    if not keyed() and not mayQueue() and delayUntil() <= now then soloLeft(r) end
    return
  end
  if headCache and #headCache < 2 * headN then
    -- The head held every holder: without tok it still does.
    for i = 1, #headCache, 2 do
      if headCache[i] == tok then
        table.remove(headCache, i)
        table.remove(headCache, i)
        break
      end
    end
  else
    headCache = nil
  end
  redis.call('HDEL', kHolders, tok)
  redis.call('ZREM', kByDeadline, tok)
  if r.dl > now then
    if liveN then liveN = liveN - 1 end
    firstTok = nil
  end
  if r.ses ~= '' and redis.call('HGET', kBySession, r.ses) == tok then redis.call('HDEL', kBySession, r.ses) end
  if r.dl <= now and r.ses ~= '' and r.delay > 0 and (r.hold == 0 or r.dl < r.hold) then
    if r.dl + r.delay > delayUntil() then
      redis.call('HSET', kMeta, 'du', s(r.dl + r.delay))
      setMeta('du', s(r.dl + r.delay))
      need(kMeta, r.dl + r.delay)
    end
  end
  if kind == 'election' and meta('lead') == tok then change(nil) end
end

-- dropTicket takes ticket t out of the queue. When the queue is left
-- empty, meta's seq goes too (see mayQueue); the arrival order starts over
-- with the next ticket.
local function dropTicket(t)
  removed = true
  local was = redis.call('ZREM', kTickets, t)
  redis.call('ZREM', kTicketLeases, t)
  redis.call('ZREM', kExclusive, t)
  redis.call('HDEL', kTicketInfo, t)
  if was == 1 and redis.call('ZCARD', kTickets) == 0 then
    redis.call('HDEL', kMeta, 'seq')
    setMeta('seq', nil)
  end
end

-- clean removes up to cleanBatch expired holders and as many lapsed
-- tickets; an election whose logged leader is gone gets its "no leader".
-- Returns whether it removed anything (someone may be let in).
-- The first few holders by deadline tell, in the usual case, everything:
-- the expired ones, the live count and the first live one (headN).
local function cleanHolders()
  local any = false
  local st, sr = solo()
  if sr then
    headCache = nil
    if sr.dl > now then
      liveN, firstTok = 1, st
      return false
    end
    removeHolder(st, sr)
    return true
  end
  if not keyed() then
    headCache, liveN, firstTok = nil, 0, false
    return false
  end
  local z = headCache or redis.call('ZRANGE', kByDeadline, 0, headN - 1, 'WITHSCORES')
  headCache = nil
  local n, gone = #z / 2, {}
  if n > 0 then seen[kByDeadline] = true end
  if n == 0 and kind == 'lock' then
    redis.call('HDEL', kMeta, 'x')
    setMeta('x', nil)
  end
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
    gone = redis.call('ZRANGEBYSCORE', kByDeadline, '-inf', s(now), 'LIMIT', 0, cleanBatch)
  end
  for i = 1, #gone do
    local r = holder(gone[i])
    if r then removeHolder(gone[i], r) else redis.call('ZREM', kByDeadline, gone[i]) end
    any = true
  end
  return any
end
local function clean()
  local any = cleanHolders()
  if mayQueue() then
    local lapsed = redis.call('ZRANGEBYSCORE', kTicketLeases, '-inf', s(now), 'LIMIT', 0, cleanBatch)
    for i = 1, #lapsed do
      dropTicket(lapsed[i])
      any = true
    end
  end
  if kind == 'election' then
    local lead = meta('lead')
    if lead and not redis.call('HEXISTS', kHolders, lead) then change(nil) any = true end
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
  local info = redis.call('HGET', kTicketInfo, t)
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
  local lease = redis.call('ZSCORE', kTicketLeases, t)
  if not lease or tonumber(lease) <= now then return nil end
  return tonumber(redis.call('ZSCORE', kTickets, t))
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
  if kind == 'semaphore' then return liveCount() + ahead(kTickets, seq) < limit end
  if shared then return ahead(kExclusive, seq) == 0 end
  return ahead(kTickets, seq) == 0
end

-- grant makes tok a holder until deadline (the fence rule: max(counter + 1,
-- floor)); its ticket, if queued, leaves the queue. Returns the record.
-- The counter lasts idleTTL from here: a later grant finds it, or, once it
-- has ended, a floor above every fence it held as long as the clock has
-- not stepped back by more than idleTTL (a fence is at most the time it was
-- issued at, but for the few a script hands off in one microsecond).
local function grant(tok, owner, ses, deadline, hold, shared, delay, floor, ticket)
  local fence = nextFence(tonumber(meta('f') or '0'), floor)
  local r = {fence = fence, dl = deadline, hold = hold, acq = now, shared = shared, delay = delay, ses = ses, own = owner}
  local live = liveCount()
  -- (Only while the holder keys are known empty: a clean-up removes at
  -- most a batch of expired holders, and what it left must stay in view.)
  if kind == 'lock' and not shared and ses == '' and not keyed() then
    -- The solo holder: the counter and the holder in one write.
    r.solo = true
    local rec = enc(r)
    redis.call('HSET', kMeta, 'f', s(fence), 'ht', tok, 'hr', rec)
    setMeta('ht', tok)
    setMeta('hr', rec)
    need(kMeta, soloMetaUntil(r))
    firstTok = tok
  else
    if kind == 'lock' then
      redis.call('HSET', kMeta, 'f', s(fence), 'x', '1')
      setMeta('x', '1')
    else
      redis.call('HSET', kMeta, 'f', s(fence))
    end
    -- Without a live holder the holders' keys may have gone with the last
    -- one: keep() tries NX first.
    if live == 0 then seen[kHolders], seen[kByDeadline] = nil, nil end
    redis.call('HSET', kHolders, tok, enc(r))
    redis.call('ZADD', kByDeadline, s(deadline), tok)
    if ses ~= '' then redis.call('HSET', kBySession, ses, tok) end
    holderNeed(deadline, ses ~= '', delay)
    firstTok = nil
  end
  setMeta('f', s(fence))
  need(kMeta, now + idleTTL)
  headCache = nil
  liveN = live + 1
  if ticket ~= '' and mayQueue() then dropTicket(ticket) end
  return r
end

-- setDeadline moves holder tok (record r) to deadline.
local function setDeadline(tok, r, deadline)
  r.dl = deadline
  if r.solo then
    local rec = enc(r)
    redis.call('HSET', kMeta, 'hr', rec)
    setMeta('hr', rec)
    need(kMeta, soloMetaUntil(r))
    firstTok = tok
    return
  end
  redis.call('HSET', kHolders, tok, enc(r))
  redis.call('ZADD', kByDeadline, s(deadline), tok)
  headCache = nil
  holderNeed(deadline, r.ses ~= '', r.delay)
  firstTok = nil
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
    local page = redis.call('ZRANGEBYSCORE', kTickets, after, '+inf', 'WITHSCORES', 'LIMIT', 0, 8)
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
      local lease = plain and inst == me and tonumber(redis.call('ZSCORE', kTicketLeases, t) or '0')
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
-- elected µs, deadline µs, rev, session ID, max hold µs}; a session-bound
-- leader's deadline is its session's as last seen (the caller reads the
-- session's own: elections.go leaderLives).
local function leaderInfo()
  local rev = tonumber(meta('rev') or '0')
  local lead = meta('lead')
  local r = lead and holder(lead)
  if r and r.dl > now then return {1, meta('val') or '', r.fence, r.acq, r.dl, rev, r.ses, r.hold} end
  return {0, '', 0, 0, 0, rev, '', 0}
end

-- A session-bound holder lives by its session. Its record carries the
-- session's deadline as last seen (the grant's, or a renewal's); once that
-- has passed, only the session can tell whether the holder is live, and it
-- is in another slot. So every hold script starts with resolve: the
-- session-bound holders whose recorded deadline has passed (a max hold
-- reached is no question: it ended) are settled by facts, which coordd
-- passes after asking their sessions (session_vouch.lua): a live one gets
-- its session's deadline (capped by its max hold), a dead one is removed,
-- its lock-delay counted from its session's deadline, and the waiters it
-- let in are woken (as clean's removals wake them). If any is left with
-- no fact, the script answers {ASK, token, session, ...} before doing
-- anything else, and coordd runs it again with the facts (holdEval). An
-- expired session is never revived, so what was seen dead stays dead.
-- resolve(mine): the holder of token mine (the caller's own, whose answer
-- depends on it) is settled too when its recorded deadline has passed,
-- whether or not it is among the first cleanBatch of them.
local facts = {}
for tok, live, dl in string.gmatch(factsArg, '(%S+) ([01]) (%d+)') do
  facts[tok] = {live = live == '1', dl = tonumber(dl)}
end
local function resolve(mine)
  if solo() or not keyed() then return nil end -- a solo holder is the only one, never session-bound
  local z = redis.call('ZRANGE', kByDeadline, 0, headN - 1, 'WITHSCORES')
  local due = {}
  for i = 1, #z, 2 do
    if tonumber(z[i + 1]) <= now then due[#due + 1] = z[i] end
  end
  if #due == headN then
    due = redis.call('ZRANGEBYSCORE', kByDeadline, '-inf', s(now), 'LIMIT', 0, cleanBatch)
  end
  if mine then
    local dl = redis.call('ZSCORE', kByDeadline, mine)
    local listed = false
    for _, tok in ipairs(due) do listed = listed or tok == mine end
    if dl and tonumber(dl) <= now and not listed then due[#due + 1] = mine end
  end
  headCache = z
  local ask, ended = {}, false
  for _, tok in ipairs(due) do
    local r = holder(tok)
    if r and r.ses ~= '' and (r.hold == 0 or r.dl < r.hold) then
      local f = facts[tok]
      if not f then
        ask[#ask + 1] = tok
        ask[#ask + 1] = r.ses
      elseif f.live and f.dl > now then
        local dl = f.dl
        if r.hold > 0 and r.hold < dl then dl = r.hold end
        setDeadline(tok, r, dl)
        settled[tok] = true
      else
        if f.dl > 0 then r.dl = f.dl end -- its session's deadline, for the lock-delay
        removeHolder(tok, r)
        settled[tok] = true
        ended = true
      end
    end
  end
  if ended then wake() end
  if #ask == 0 then return nil end
  keep()
  table.insert(ask, 1, ASK)
  return ask
end
