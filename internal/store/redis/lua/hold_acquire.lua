-- Grants a hold of its kind (a lock, exclusive or shared; a semaphore's
-- permit; a leadership), or queues the request's ticket. Arguments:
-- holdAcquireArgs (holds.go). A clock behind timeSeen (a failover promoted
-- a node whose clock is behind the old master's) floors fences at it + 1,
-- so that they stay above those the old master issued and lost. full: the
-- session holds as many holds as it may (a hold it has is still answered
-- as its own, and one it may not get as NO).
-- Returns {OK, fence, deadline, now, holders, limit} granted (also when a
-- plain request with a ticket comes back with a token that holds already:
-- granted by a hand-off; its ticket, if queued, leaves the queue);
-- {NO, holder owner, holder deadline (0: none blocks), now, retry at (0:
-- only a wake-up), queued (0/1), holders, limit, holder's session ID
-- ('' for none: its deadline is its session's as last seen, holds.go reads
-- the session's own), holder's max hold, leader...} not granted
-- (leader...: leaderInfo's eight values, for an election);
-- {ALREADY_HELD, token, fence, deadline, now, max hold (0: none)} the
-- session has it already;
-- {SESSION_GONE} the session's deadline has passed; {FULL} the session is
-- full; {LIMIT_MISMATCH, limit} another limit is the semaphore's;
-- {TOO_MANY_WAITERS} the queue is full.
local asked = resolve() -- session-bound holders past their recorded deadline (hold_prelude.lua)
if asked then return asked end
shared = kind == 'lock' and shared
local cleaned = clean()
local function leave(reply)
  if cleaned then wake() end
  keep()
  return reply
end
if ses == '' and ticket ~= '' then
  local r = holder(tok)
  if r and r.dl > now then
    if ticket ~= '' and mayQueue() and redis.call('ZSCORE', kTickets, ticket) then
      dropTicket(ticket)
      cleaned = true
    end
    local lim = 0
    if kind == 'semaphore' then lim = tonumber(meta('lim') or '0') end
    return leave({OK, r.fence, r.dl, now, liveCount(), lim})
  end
elseif ses ~= '' then
  local t = keyed() and redis.call('HGET', kBySession, ses)
  local r = t and holder(t)
  if r and r.dl > now then
    -- Answered: a ticket this request queued leaves (it would block others).
    if ticket ~= '' and mayQueue() and redis.call('ZSCORE', kTickets, ticket) then
      dropTicket(ticket)
      cleaned = true
    end
    return leave({ALREADY_HELD, t, r.fence, r.dl, now, r.hold})
  end
end
if kind == 'semaphore' then
  local lim = meta('lim')
  local inUse = liveCount() > 0 or (mayQueue() and redis.call('ZCOUNT', kTicketLeases, '(' .. s(now), '+inf') > 0)
  if lim and inUse and tonumber(lim) ~= limit then return leave({LIMIT_MISMATCH, tonumber(lim)}) end
  if lim ~= s(limit) then
    redis.call('HSET', kMeta, 'lim', s(limit))
    setMeta('lim', s(limit))
    -- Only a holder or a ticket keeps the limit (their needs below); the
    -- key itself must end in any case.
    need(kMeta, now)
  end
else
  limit = 0
end
local seq = ticketSeq(ticket)
if eligible(shared, maxHolders, limit, seq) then
  if full then return leave({FULL}) end
  local hold = 0
  if maxHold > 0 then hold = now + maxHold end
  local deadline = now + ttl
  if ses ~= '' then
    deadline = sessionDeadline
    if deadline <= now then return leave({SESSION_GONE}) end
  end
  if hold > 0 and hold < deadline then deadline = hold end
  local r = grant(tok, owner, ses, deadline, hold, shared, delay, fenceFloor(timeSeen), ticket)
  if kind == 'election' then change(tok, r, value) end
  -- A shared grant or a permit may let the next tickets in too.
  if cleaned or shared or kind == 'semaphore' then wake() end
  keep()
  return {OK, r.fence, deadline, now, liveCount(), limit}
end
local queued = 0
if ticket ~= '' then
  local leaseEnd = now + lease
  if seq then
    redis.call('ZADD', kTicketLeases, s(leaseEnd), ticket)
  else
    if mayQueue() then
      if redis.call('ZCOUNT', kTicketLeases, '(' .. s(now), '+inf') >= maxWaiters then return leave({TOO_MANY_WAITERS}) end
      -- Lapsed but not yet cleaned up: back of the queue.
      if redis.call('ZSCORE', kTickets, ticket) then dropTicket(ticket) end
    end
    local n = redis.call('HINCRBY', kMeta, 'seq', 1)
    setMeta('seq', s(n))
    redis.call('ZADD', kTickets, n, ticket)
    redis.call('ZADD', kTicketLeases, s(leaseEnd), ticket)
    local plain
    if ses == '' and kind ~= 'election' then
      plain = {ttl = ttl, hold = maxHold, tok = tok, own = owner}
    end
    redis.call('HSET', kTicketInfo, ticket, ticketRecord(not shared, maxHolders, instance, plain))
    if not shared then redis.call('ZADD', kExclusive, n, ticket) end
  end
  ticketNeed(leaseEnd, not shared)
  queued = 1
end
local hown, hdl, retry, hses, hhold = '', 0, 0, '', 0
if not fits(shared, maxHolders, limit) then
  local _, r = firstLive()
  if r then hown, hdl, retry, hses, hhold = r.own, r.dl, r.dl, r.ses, r.hold end
end
local du = delayUntil()
if du > now and du > retry then retry = du end
local out = {NO, hown, hdl, now, retry, queued, liveCount(), limit, hses, hhold}
if kind == 'election' then
  for _, v in ipairs(leaderInfo()) do out[#out + 1] = v end
end
return leave(out)
