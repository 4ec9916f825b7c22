-- Token bucket and leaky bucket: GCRA (store/ratelimit.go). A denial
-- writes nothing.
-- KEYS[1]: the theoretical arrival time µs (string)
-- ARGV[3]: limit  ARGV[4]: period µs  ARGV[5]: cost  ARGV[6]: "1" to peek
-- ARGV[7]: capacity
-- Returns {OK allowed or NO denied, remaining, retry after µs, reset after µs}.
local L, P, c, C = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[7])
local T = math.floor((P + L - 1) / L)
local tat = math.max(tonumber(redis.call('GET', KEYS[1]) or '0'), now)
local new = tat + c * T
local allowAt = new - C * T
local after = tat
if allowAt <= now then after = new end
local remaining = math.floor((C * T - (after - now)) / T)
remaining = math.min(math.max(remaining, 0), C)
if allowAt > now then
  return {NO, remaining, allowAt - now, after - now}
end
if ARGV[6] ~= '1' then
  redis.call('SET', KEYS[1], s(new))
  expireAt(KEYS[1], new)
end
return {OK, remaining, 0, after - now}
