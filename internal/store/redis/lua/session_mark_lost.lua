-- Turns holds (of any kind) a session no longer has into loss reports:
-- each hold leaves the set, and gets a report, only if its entry still has
-- the given token (a hold released by its token meanwhile left the set
-- itself: not lost).
-- KEYS[1]: the session  KEYS[2]: its holds  KEYS[3]: its loss reports
-- ARGV[3]: the session's wake-up channel, published to if a report was
--          made ("": none; the session's own stream is the caller)
-- ARGV[4], ARGV[5], ARGV[6], ...: triples of field ("kind:name"), token and
-- reason (lostMaxHold or lostGone)
-- Returns, for each triple, the report's seq, or 0 if it made none.
local cur = redis.call('HMGET', KEYS[1], 'seq', 'dl')
local out = {}
if not cur[2] then
  -- No session (it ended): nothing to report to, and nothing is written.
  for i = 4, #ARGV, 3 do out[#out + 1] = 0 end
  return out
end
local seq = tonumber(cur[1] or '0')
local made = false
for i = 4, #ARGV, 3 do
  local field, tok = ARGV[i], ARGV[i + 1]
  local entry = redis.call('HGET', KEYS[2], field)
  if entry and string.sub(entry, 1, #tok + 1) == tok .. ' ' then
    redis.call('HDEL', KEYS[2], field)
    seq = seq + 1
    redis.call('HSET', KEYS[3], s(seq), lossReport(tonumber(ARGV[i + 2]), string.match(entry, '^%S+ (%d+)'), field))
    out[#out + 1] = seq
    made = true
  else
    out[#out + 1] = 0
  end
end
redis.call('HSET', KEYS[1], 'seq', s(seq))
if made and ARGV[3] ~= '' then redis.call('SPUBLISH', ARGV[3], '') end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[3], ttl) end
return out
