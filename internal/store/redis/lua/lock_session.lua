-- The lock kind of session hold (holdKind in locks.go): renews, checks or
-- drops a session's lock, from the session's keepalive, check or close.
-- KEYS[1]: the lock
-- ARGV[3]: the session's token for it  ARGV[4]: the session's deadline µs
-- ARGV[5]: "renew" (extend the deadline to min(session deadline, max hold);
--          never shorten it, so that renewals applied out of order are
--          harmless), "check", or "drop" (delete it if it is still the
--          session's)
-- ARGV[6]: the lock's wake-up channel
-- Returns {OK} if the session holds the lock live, else {NO}; for "drop",
-- {OK, µs it was held} if it held it live, else {NO}.
local cur = redis.call('HMGET', KEYS[1], 'tok', 'dl', 'hold', 'acq')
if ARGV[5] == 'drop' then
  if cur[1] ~= ARGV[3] then return {NO} end
  redis.call('DEL', KEYS[1])
  if tonumber(cur[2]) <= now then return {NO} end
  redis.call('SPUBLISH', ARGV[6], '')
  return {OK, now - tonumber(cur[4])}
end
if cur[1] ~= ARGV[3] then return {NO} end
local live = tonumber(cur[2]) > now
if not live then return {NO} end
if ARGV[5] == 'renew' then
  local deadline = tonumber(ARGV[4])
  local hold = tonumber(cur[3])
  if hold > 0 and hold < deadline then deadline = hold end
  if deadline > tonumber(cur[2]) then
    redis.call('HSET', KEYS[1], 'dl', s(deadline))
    expireAt(KEYS[1], deadline)
  end
end
return {OK}
