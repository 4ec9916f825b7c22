-- Turns holds (of any kind) a session no longer has into loss reports:
-- each hold leaves the set, and gets a report, only if its entry still has
-- the given token (a hold released by its token meanwhile left the set
-- itself: not lost).
-- Arguments: sessionMarkLostArgs (sessions.go); keys: the session's
-- (keys.go, sessionKeyParts).
-- Returns, for each triple, the report's seq, or 0 if it made none.
local cur = redis.call('HMGET', kSession, 'seq', 'dl')
local out = {}
if not cur[2] then
  -- No session (it ended): nothing to report to, and nothing is written.
  for _ = 1, #triples, 3 do out[#out + 1] = 0 end
  return out
end
local seq = tonumber(cur[1] or '0')
local made = false
for i = 1, #triples, 3 do
  local field, tok = triples[i], triples[i + 1]
  local entry = redis.call('HGET', kHolds, field)
  if entry and string.sub(entry, 1, #tok + 1) == tok .. ' ' then
    redis.call('HDEL', kHolds, field)
    seq = seq + 1
    redis.call('HSET', kLost, s(seq), lossReport(tonumber(triples[i + 2]), string.match(entry, '^%S+ (%d+)'), field))
    out[#out + 1] = seq
    made = true
  else
    out[#out + 1] = 0
  end
end
redis.call('HSET', kSession, 'seq', s(seq))
if made and channel ~= '' then redis.call('SPUBLISH', channel, '') end
local ttl = redis.call('PTTL', kSession)
if ttl > 0 then redis.call('PEXPIRE', kLost, ttl) end
return out
