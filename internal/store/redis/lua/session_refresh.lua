-- Renews or checks a session, or reports it expired.
-- KEYS[1]: the session  KEYS[2]: its lock set
-- ARGV[3]: "renew" or "check"  ARGV[4]: new ttl µs (0: keep the current one)
-- ARGV[5]: grace µs
-- Returns {-1} unknown (or expired longer than the grace ago); {-2} closing
-- (a close began and did not finish: the caller finishes it);
-- {0, deadline, now, indexed, name, entry, ...} expired: the session and its
-- set are deleted and its lock entries returned (once);
-- {1, deadline, now, indexed, name, entry, ...} live, renewed if asked.
-- indexed is "1" if the session is in its namespace's index.
local cur = redis.call('HMGET', KEYS[1], 'ttl', 'dl', 'ix', 'closing')
if not cur[2] then return {-1} end
if cur[4] then return {-2} end
local deadline = tonumber(cur[2])
local grace = tonumber(ARGV[5])
if deadline + grace <= now then
  redis.call('DEL', KEYS[1], KEYS[2])
  return {-1}
end
local out = {1, deadline, now, cur[3] or ''}
if deadline <= now then
  out[1] = 0
  local entries = redis.call('HGETALL', KEYS[2])
  for i = 1, #entries do out[#out + 1] = entries[i] end
  redis.call('DEL', KEYS[1], KEYS[2])
  return out
end
if ARGV[3] == 'renew' then
  local ttl = tonumber(ARGV[4])
  if ttl <= 0 then ttl = tonumber(cur[1]) end
  deadline = math.max(deadline, now + ttl) -- never shortened
  out[2] = deadline
  redis.call('HSET', KEYS[1], 'ttl', s(ttl), 'dl', s(deadline))
  expireAt(KEYS[1], deadline + grace)
  expireAt(KEYS[2], deadline + grace)
end
local entries = redis.call('HGETALL', KEYS[2])
for i = 1, #entries do out[#out + 1] = entries[i] end
return out
