-- Grants a lock if it is not live.
-- KEYS[1]: the lock (hash: tok own ses fen acq dl hold)
-- KEYS[2]: its fence counter (string; never expires)
-- ARGV[3]: token  ARGV[4]: owner  ARGV[5]: ttl µs  ARGV[6]: max hold µs (0: none)
-- ARGV[7]: session ID ("" for a plain lease)
-- ARGV[8]: the session's deadline µs (with a session)
-- ARGV[9]: the highest server time µs this coordd has seen from this script
--          (0: none). A clock behind it (a failover promoted a node whose
--          clock is behind the old master's) floors fences at it + 1, so
--          that they stay above those the old master issued and lost.
-- ARGV[10]: "1" if the session holds as many locks as it may (a lock held
--           is still answered as held, or as the session's own)
-- Returns {OK, fence, deadline, now} granted; {NO, holder owner, holder
-- deadline, now} held; {SESSION_GONE} the session's deadline has passed;
-- {ALREADY_HELD, token, fence, deadline, now} the session already holds it
-- (its existing grant); {FULL} the session is full.
local cur = redis.call('HMGET', KEYS[1], 'own', 'dl', 'ses', 'tok', 'fen')
if cur[2] and tonumber(cur[2]) > now then
  if ARGV[7] ~= '' and cur[3] == ARGV[7] then
    return {ALREADY_HELD, cur[4], tonumber(cur[5]), tonumber(cur[2]), now}
  end
  return {NO, cur[1], tonumber(cur[2]), now}
end
if ARGV[10] == '1' then return {FULL} end
local hold = 0
if tonumber(ARGV[6]) > 0 then hold = now + tonumber(ARGV[6]) end
local deadline = now + tonumber(ARGV[5])
if ARGV[7] ~= '' then
  deadline = tonumber(ARGV[8])
  if deadline <= now then return {SESSION_GONE} end
end
if hold > 0 and hold < deadline then deadline = hold end
local floor = now
if tonumber(ARGV[9]) > now then floor = tonumber(ARGV[9]) + 1 end
local fence = math.max(tonumber(redis.call('GET', KEYS[2]) or '0') + 1, floor)
redis.call('SET', KEYS[2], s(fence))
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'tok', ARGV[3], 'own', ARGV[4], 'ses', ARGV[7],
  'fen', s(fence), 'acq', s(now), 'dl', s(deadline), 'hold', s(hold))
expireAt(KEYS[1], deadline)
return {OK, fence, deadline, now}
