-- Ends a session, in two steps, so that a close interrupted between them can
-- be finished by a retry: "begin" marks the session closing (from then on it
-- is no session: no keepalive, no new hold) and lists its holds, for the
-- caller to release; "finish", once they are released, deletes it.
-- KEYS[1]: the session  KEYS[2]: its holds  KEYS[3]: its loss reports
-- ARGV[3]: "begin" or "finish"  ARGV[4]: grace µs
-- ARGV[5]: the caller's stream epoch (0: none)
-- Returns, for "begin": {SESSION_GONE} unknown; {SUPERSEDED} the caller's
-- stream was superseded (nothing changes); {EXPIRED} it had expired
-- (forgotten now, nothing to release); {OK, indexed, field, entry, ...}
-- closing, with its hold entries (field "kind:name"; again, if a close
-- began before). For "finish": {OK}.
if ARGV[3] == 'finish' then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
  return {OK}
end
local cur = redis.call('HMGET', KEYS[1], 'dl', 'ix', 'closing', 'gen')
local deadline = tonumber(cur[1] or '-1')
if deadline < 0 or deadline + tonumber(ARGV[4]) <= now then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
  return {SESSION_GONE}
end
local stream = tonumber(ARGV[5])
if not cur[3] and stream ~= 0 and stream ~= tonumber(cur[4] or '1') then return {SUPERSEDED} end
if deadline <= now and not cur[3] then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
  return {EXPIRED}
end
redis.call('HSET', KEYS[1], 'closing', '1')
local out = {OK, cur[2] or ''}
local entries = redis.call('HGETALL', KEYS[2])
for i = 1, #entries do out[#out + 1] = entries[i] end
return out
