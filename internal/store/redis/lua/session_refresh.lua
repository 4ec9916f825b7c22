-- Renews, checks or resumes a session, or reports it expired.
-- Arguments: sessionRefreshArgs (sessions.go); keys: the session's
-- (keys.go, sessionKeyParts).
-- Returns {SESSION_GONE} unknown (or expired longer than the grace ago);
-- {CLOSING} a close began and did not finish (the caller finishes it);
-- {SUPERSEDED} the caller's stream was superseded; else
-- {code, deadline, now, touch, epoch, nl, ttl, hv, due, n, seq, report,
-- ... (n pairs), field, entry, ...} with code EXPIRED (its holds became
-- reports, once; nothing is renewed) or OK live (renewed unless "check"),
-- the unacknowledged reports, and, if live and due is 1, the hold entries
-- left in the set (field "kind:name"); if EXPIRED, the entries this call
-- made reports of (the caller drops their holds: their ends are due now).
-- A session-bound hold lives by its session (hold_prelude.lua's resolve),
-- so a heartbeat renews the session only, and looks at its holds (due)
-- only when their keys' horizon (field hk: what the last look renewed
-- them to, session_holds_kept.lua) comes within two ttls of the new
-- deadline, or when a max hold or a pending binding's end (field nl) has
-- come; hv is the set's version, for session_holds_kept.lua. touch is the
-- score the caller gives the session in its namespace's index, or "" for
-- no touch: a session in the index (field ix: the score it was last
-- given, "1" for its admission's) is touched when a renewal brings its
-- deadline within a ttl of that score, to 3 ttl past its deadline, so
-- that one heartbeat in about six goes to the index (session_index.lua).
-- The set and the reports are bounded by the session's cap
-- (session_add_hold.lua counts both). Reports are numbered by seq, in
-- order: those up to an ack are deleted once (field ak: the highest ack
-- applied), so unacknowledged ones exist only if seq is above the ack, and
-- the reports are read only then.
local cur = redis.call('HMGET', kSession, 'ttl', 'dl', 'ix', 'closing', 'gen', 'seq', 'ak', 'hk', 'nl', 'hv')
if not cur[2] then return {SESSION_GONE} end
if cur[4] then return {CLOSING} end
local epoch = tonumber(cur[5] or '1')
if mode ~= 'resume' and stream ~= 0 and stream ~= epoch then return {SUPERSEDED} end
local deadline = tonumber(cur[2])
if deadline + grace <= now then
  redis.call('DEL', kSession, kHolds, kLost)
  return {SESSION_GONE}
end
local seq = tonumber(cur[6] or '0')
if ack > tonumber(cur[7] or '0') and ack <= seq then
  local seqs = redis.call('HKEYS', kLost)
  for i = 1, #seqs do
    if tonumber(seqs[i]) <= ack then redis.call('HDEL', kLost, seqs[i]) end
  end
  redis.call('HSET', kSession, 'ak', s(ack))
end
local code = OK
local expiredEntries = {}
local touch = ''
if deadline <= now then
  code = EXPIRED
  expiredEntries = redis.call('HGETALL', kHolds)
  local entries = expiredEntries
  for i = 1, #entries, 2 do
    local fence, hold = string.match(entries[i + 1], '^%S+ (%d+) (%d+)')
    local reason = lostExpired
    if tonumber(hold) > 0 and tonumber(hold) <= deadline then reason = lostMaxHold end
    seq = seq + 1
    redis.call('HSET', kLost, s(seq), lossReport(reason, fence, entries[i]))
  end
  redis.call('DEL', kHolds)
  redis.call('HSET', kSession, 'seq', s(seq))
  expireAt(kLost, stepUp(deadline + grace))
elseif mode ~= 'check' then
  if mode == 'resume' then
    epoch = epoch + 1
    redis.call('HSET', kSession, 'gen', s(epoch))
    redis.call('SPUBLISH', channel, '')
  end
  if ttl <= 0 then ttl = tonumber(cur[1]) end
  local before = stepUp(deadline + grace)
  deadline = math.max(deadline, now + ttl) -- never shortened
  redis.call('HSET', kSession, 'ttl', s(ttl), 'dl', s(deadline))
  local ix = tonumber(cur[3] or '') -- nil: not in the index ('' at its creation)
  if ix and (cur[3] == '1' or ix < deadline + ttl) then
    touch = s(deadline + 3 * ttl)
    redis.call('HSET', kSession, 'ix', touch)
  end
  -- Every script keeps the three keys until at least stepUp(deadline +
  -- grace) of the deadline it saw (session_mark_lost.lua copies the
  -- session's TTL), so they need a new TTL only when that moves.
  local keepUntil = stepUp(deadline + grace)
  if keepUntil > before then
    expireAt(kSession, keepUntil)
    expireAt(kHolds, keepUntil)
    expireAt(kLost, keepUntil)
  end
end
local reports = {}
if seq > ack then reports = redis.call('HGETALL', kLost) end
local curTTL = tonumber(cur[1])
if ttl > 0 and mode ~= 'check' then curTTL = ttl end
local hk, nl = tonumber(cur[8] or '0'), tonumber(cur[9] or '0')
-- Two TTLs of margin: a look whose renewals fail is tried again by the
-- next heartbeats, before the session's deadline can pass the horizon.
local due = code == OK and ((mode ~= 'check' and deadline + 2 * curTTL > hk) or (nl > 0 and nl <= now))
local out = {code, deadline, now, touch, epoch, nl, curTTL, cur[10] or '0', due and 1 or 0, #reports / 2}
for i = 1, #reports do out[#out + 1] = reports[i] end
if due then
  local entries = redis.call('HGETALL', kHolds)
  for i = 1, #entries do out[#out + 1] = entries[i] end
elseif code ~= OK then
  for i = 1, #expiredEntries do out[#out + 1] = expiredEntries[i] end
end
return out
