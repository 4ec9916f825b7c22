-- Claims an idempotency key or reports its state.
-- Arguments: idemBeginArgs (idem.go).
-- Returns {MISMATCH} fingerprint mismatch; {MEMORY_HIGH} a new key refused;
-- else {OK, outcome, ...}:
-- {OK, EXECUTE, deadline, now} claimed for the owner; {OK, IN_PROGRESS,
-- deadline, now}; {OK, COMPLETED or FAILED, expiry, now, stored outcome}.
-- Outcomes are store.Outcome's.
local EXECUTE, IN_PROGRESS, COMPLETED, FAILED = 1, 2, 3, 4
local cur = redis.call('HMGET', kKey, 'st', 'fp', 'dl', 'ex', 'out')
local st = cur[1]
if st and tonumber(cur[4]) <= now then st = false end
if st and cur[2] ~= fingerprint then return {MISMATCH} end
if not st and refuseNew then return {MEMORY_HIGH} end
if not st or (st == 'p' and tonumber(cur[3]) <= now) then
  local deadline = now + ttl
  local ex = deadline + retention
  redis.call('DEL', kKey)
  redis.call('HSET', kKey, 'st', 'p', 'fp', fingerprint, 'own', owner, 'dl', s(deadline), 'ex', s(ex))
  expireAt(kKey, ex)
  return {OK, EXECUTE, deadline, now}
end
if st == 'p' then return {OK, IN_PROGRESS, tonumber(cur[3]), now} end
local outcome = COMPLETED
if st == 'f' then outcome = FAILED end
return {OK, outcome, tonumber(cur[4]), now, cur[5]}
