-- Fixed window (store/ratelimit.go).
-- KEYS[1]: the limiter (hash: w n)
-- ARGV[3]: limit  ARGV[4]: period µs  ARGV[5]: cost  ARGV[6]: "1" to peek
-- Returns {OK allowed or NO denied, remaining, retry after µs, reset after µs}.
local L, P, c = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local w = math.floor(now / P)
local cur = redis.call('HMGET', KEYS[1], 'w', 'n')
local n = 0
-- A later window than now's (the clock stepped back) stays current.
if cur[1] and tonumber(cur[1]) >= w then w, n = tonumber(cur[1]), tonumber(cur[2]) end
local stop = (w + 1) * P
if n + c > L then
  local reset = 0
  if n > 0 then reset = stop - now end
  return {NO, L - n, stop - now, reset}
end
if ARGV[6] ~= '1' then
  redis.call('HSET', KEYS[1], 'w', s(w), 'n', s(n + c))
  expireAt(KEYS[1], stop + P) -- kept a period longer, for a step back
end
return {OK, L - n - c, 0, stop - now}
