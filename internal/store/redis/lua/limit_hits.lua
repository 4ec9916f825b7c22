-- Adds hits to a counter of a fixed window (store/ratelimit.go, "Counting
-- hits"), whatever its count: Envoy's rate limit service counts this way.
-- kCounter: the counter (hash: w n), of its key and period alone.
-- Arguments: limitHitsArgs (limits.go).
-- Returns {OK, the count after, now µs}.
local w = math.floor(now / period)
local n = 0
local cur = redis.call('HMGET', kCounter, 'w', 'n')
-- A later window than now's (the clock stepped back) stays current.
if cur[1] and tonumber(cur[1]) >= w then w, n = tonumber(cur[1]), tonumber(cur[2]) end
if hits > 0 then
  n = math.min(n + hits, maxCount)
  redis.call('HSET', kCounter, 'w', s(w), 'n', s(n))
  expireAt(kCounter, (w + 2) * period) -- kept a period longer, for a step back
end
return {OK, n, now}
