-- Ends a session, in two steps, so that a close interrupted between them can
-- be finished by a retry: "begin" marks the session closing (from then on it
-- is no session: no keepalive, no new hold) and lists its holds, for the
-- caller to release; "finish", once they are released, deletes it.
-- Arguments: sessionCloseArgs (sessions.go); keys: the session's
-- (keys.go, sessionKeyParts).
-- Returns, for "begin": {SESSION_GONE} unknown; {SUPERSEDED} the caller's
-- stream was superseded (nothing changes); {EXPIRED} it had expired
-- (forgotten now, nothing to release); {OK, indexed, field, entry, ...}
-- closing, with its hold entries (field "kind:name"; again, if a close
-- began before). For "finish": {OK}.
if mode == 'finish' then
  redis.call('DEL', kSession, kHolds, kLost)
  return {OK}
end
local cur = redis.call('HMGET', kSession, 'dl', 'ix', 'closing', 'gen')
local deadline = tonumber(cur[1] or '-1')
if deadline < 0 or deadline + grace <= now then
  redis.call('DEL', kSession, kHolds, kLost)
  return {SESSION_GONE}
end
if not cur[3] and stream ~= 0 and stream ~= tonumber(cur[4] or '1') then return {SUPERSEDED} end
if deadline <= now and not cur[3] then
  redis.call('DEL', kSession, kHolds, kLost)
  return {EXPIRED}
end
redis.call('HSET', kSession, 'closing', '1')
local out = {OK, cur[2] or ''}
local entries = redis.call('HGETALL', kHolds)
for i = 1, #entries do out[#out + 1] = entries[i] end
return out
