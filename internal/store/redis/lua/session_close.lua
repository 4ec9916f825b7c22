-- Ends a session at once.
-- KEYS[1]: the session  KEYS[2]: its lock set
-- ARGV[3]: grace µs
-- Returns {-1} unknown; {0} it had expired (forgotten now, nothing to
-- release); {1, name, entry, ...} its lock entries, for the caller to
-- release. The session and its set are deleted.
local deadline = tonumber(redis.call('HGET', KEYS[1], 'dl') or '-1')
if deadline < 0 or deadline + tonumber(ARGV[3]) <= now then
  redis.call('DEL', KEYS[1], KEYS[2])
  return {-1}
end
local out = {1}
if deadline <= now then
  out = {0}
else
  local entries = redis.call('HGETALL', KEYS[2])
  for i = 1, #entries do out[#out + 1] = entries[i] end
end
redis.call('DEL', KEYS[1], KEYS[2])
return out
