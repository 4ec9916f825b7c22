-- Sliding window counter (store/ratelimit.go).
-- KEYS[1]: the limiter (hash: w cur prev)
-- ARGV[3]: limit  ARGV[4]: period µs  ARGV[5]: cost  ARGV[6]: "1" to peek
-- Returns {OK allowed or NO denied, remaining, retry after µs, reset after µs}.
local L, P, c = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local w = math.floor(now / P)
local cur, prev = 0, 0
local st = redis.call('HMGET', KEYS[1], 'w', 'cur', 'prev')
if st[1] then
  local sw = tonumber(st[1])
  if sw >= w then
    -- A later window than now's (the clock stepped back) stays current,
    -- decided as at its start.
    w, cur, prev = sw, tonumber(st[2]), tonumber(st[3])
  elseif sw == w - 1 then
    prev = tonumber(st[2])
  end
end
local e = math.max(0, now - w * P)
local function estimate(p, q, x) return p * (P - x) / P + q end
local est = estimate(prev, cur, e)
if est + c <= L then
  if ARGV[6] ~= '1' then
    redis.call('HSET', KEYS[1], 'w', s(w), 'cur', s(cur + c), 'prev', s(prev))
    expireAt(KEYS[1], (w + 2) * P)
  end
  return {OK, math.max(0, math.floor(L - est - c)), 0, (w + 2) * P - now}
end
local reset = 0
if cur > 0 then reset = (w + 2) * P - now elseif prev > 0 then reset = (w + 1) * P - now end
local function allowed(p, q, x) return estimate(p, q, x) + c <= L end
-- first: in a window with counts p and q, the first x in [from, P) at which
-- the call is allowed, or -1.
local function first(p, q, from)
  if q + c > L then return -1 end
  if p == 0 then return from end
  local room = L - q - c
  local x = math.max(math.ceil(P - room * P / p), from)
  while x > from and allowed(p, q, x - 1) do x = x - 1 end
  while x < P and not allowed(p, q, x) do x = x + 1 end
  if x >= P then return -1 end
  return x
end
local at = first(prev, cur, e + 1)
if at >= 0 then
  at = w * P + at
else
  at = first(cur, 0, 0)
  if at >= 0 then at = (w + 1) * P + at else at = (w + 2) * P end
end
return {NO, math.max(0, math.floor(L - est)), at - now, reset}
