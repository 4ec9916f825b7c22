-- Turns locks a session no longer holds into loss reports: each lock leaves
-- the set, and gets a report, only if its entry still has the given token
-- (a lock released by its token meanwhile left the set itself: not lost).
-- KEYS[1]: the session  KEYS[2]: its lock set  KEYS[3]: its loss reports
-- ARGV[3], ARGV[4], ARGV[5], ...: triples of lock name, token and reason
-- (lostMaxHold or lostGone)
-- Returns, for each triple, the report's seq, or 0 if it made none.
local cur = redis.call('HMGET', KEYS[1], 'seq', 'dl')
local seq = tonumber(cur[1] or '0')
local out = {}
for i = 3, #ARGV, 3 do
  local name, tok = ARGV[i], ARGV[i + 1]
  local entry = redis.call('HGET', KEYS[2], name)
  if entry and string.sub(entry, 1, #tok + 1) == tok .. ' ' then
    redis.call('HDEL', KEYS[2], name)
    seq = seq + 1
    redis.call('HSET', KEYS[3], s(seq), lossReport(tonumber(ARGV[i + 2]), string.match(entry, '^%S+ (%d+)'), name))
    out[#out + 1] = seq
  else
    out[#out + 1] = 0
  end
end
redis.call('HSET', KEYS[1], 'seq', s(seq))
if cur[2] then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[3], ttl) end
end
return out
