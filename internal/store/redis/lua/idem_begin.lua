-- Claims an idempotency key or reports its state.
-- KEYS[1]: the key (hash: st fp own dl ex out), st "p" processing,
--          "c" completed, "f" failed; ex: when it is forgotten
-- ARGV[3]: fingerprint  ARGV[4]: owner token  ARGV[5]: processing ttl µs
-- ARGV[6]: retention µs of an abandoned key
-- Returns {MISMATCH} fingerprint mismatch; else {OK, outcome, ...}:
-- {OK, EXECUTE, deadline, now} claimed for the owner; {OK, IN_PROGRESS,
-- deadline, now}; {OK, COMPLETED or FAILED, expiry, now, stored outcome}.
-- Outcomes are store.Outcome's.
local EXECUTE, IN_PROGRESS, COMPLETED, FAILED = 1, 2, 3, 4
local cur = redis.call('HMGET', KEYS[1], 'st', 'fp', 'dl', 'ex', 'out')
local st = cur[1]
if st and tonumber(cur[4]) <= now then st = false end
if st and cur[2] ~= ARGV[3] then return {MISMATCH} end
if not st or (st == 'p' and tonumber(cur[3]) <= now) then
  local deadline = now + tonumber(ARGV[5])
  local ex = deadline + tonumber(ARGV[6])
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'st', 'p', 'fp', ARGV[3], 'own', ARGV[4], 'dl', s(deadline), 'ex', s(ex))
  expireAt(KEYS[1], ex)
  return {OK, EXECUTE, deadline, now}
end
if st == 'p' then return {OK, IN_PROGRESS, tonumber(cur[3]), now} end
local outcome = COMPLETED
if st == 'f' then outcome = FAILED end
return {OK, outcome, tonumber(cur[4]), now, cur[5]}
