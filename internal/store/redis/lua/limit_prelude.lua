-- The prelude of limit_allow.lua: the rate-limiting algorithms of
-- store/ratelimit.go, one function each. A function takes its limiter's
-- keys (k1, and k2 for the sliding log), the limit L, period P µs, cost c
-- and capacity C, decides as if the call were made, and returns allowed
-- (boolean), remaining, retry after µs, reset after µs, and a function that
-- writes the admission: called only if the call is allowed (by every limit
-- of the call) and not a peek. Deciding writes nothing.

-- Fixed window. k1: the limiter (hash: w n).
local function fixedWindow(k1, _, L, P, c)
  local w = math.floor(now / P)
  local cur = redis.call('HMGET', k1, 'w', 'n')
  local n = 0
  -- A later window than now's (the clock stepped back) stays current.
  if cur[1] and tonumber(cur[1]) >= w then w, n = tonumber(cur[1]), tonumber(cur[2]) end
  local stop = (w + 1) * P
  if n + c > L then
    local reset = 0
    if n > 0 then reset = stop - now end
    return false, L - n, stop - now, reset
  end
  return true, L - n - c, 0, stop - now, function()
    redis.call('HSET', k1, 'w', s(w), 'n', s(n + c))
    expireAt(k1, stop + P) -- kept a period longer, for a step back
  end
end

-- Sliding window counter. k1: the limiter (hash: w cur prev).
local function slidingWindow(k1, _, L, P, c)
  local w = math.floor(now / P)
  local cur, prev = 0, 0
  local st = redis.call('HMGET', k1, 'w', 'cur', 'prev')
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
    return true, math.max(0, math.floor(L - est - c)), 0, (w + 2) * P - now, function()
      redis.call('HSET', k1, 'w', s(w), 'cur', s(cur + c), 'prev', s(prev))
      expireAt(k1, (w + 2) * P)
    end
  end
  local reset = 0
  if cur > 0 then reset = (w + 2) * P - now elseif prev > 0 then reset = (w + 1) * P - now end
  local function allowed(p, q, x) return estimate(p, q, x) + c <= L end
  -- first: in a window with counts p and q, the first x in [from, P) at
  -- which the call is allowed, or -1.
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
  return false, math.max(0, math.floor(L - est)), at - now, reset
end

-- Sliding log. At most limit entries exist, since a denial logs nothing,
-- and limit is capped by ratelimit.max_log_limit. Expired entries are
-- removed by the next admission only, so that a peek or a denial changes
-- nothing even if the clock later steps back.
-- k1: the log (sorted set: score = time µs, member = "seq:cost")
-- k2: its totals (hash: sum seq)
local function slidingLog(k1, k2, L, P, c)
  local horizon = s(now - P)
  local used = tonumber(redis.call('HGET', k2, 'sum') or '0')
  local old = redis.call('ZRANGEBYSCORE', k1, '-inf', horizon)
  for i = 1, #old do
    used = used - tonumber(string.match(old[i], ':(%d+)$'))
  end
  if used + c <= L then
    -- The latest entry after the admission: now, unless the clock stepped
    -- back below entries that stay live until their own time + P.
    local last = now
    local newest = redis.call('ZRANGE', k1, -1, -1, 'WITHSCORES')
    if #newest > 0 then last = math.max(last, tonumber(newest[2])) end
    return true, L - used - c, 0, last + P - now, function()
      if #old > 0 then redis.call('ZREMRANGEBYSCORE', k1, '-inf', horizon) end
      local seq = redis.call('HINCRBY', k2, 'seq', 1)
      redis.call('ZADD', k1, s(now), string.format('%016d:%d', seq, c))
      redis.call('HSET', k2, 'sum', s(used + c))
      expireAt(k1, last + P)
      expireAt(k2, last + P)
    end
  end
  local entries = redis.call('ZRANGEBYSCORE', k1, '(' .. horizon, '+inf', 'WITHSCORES')
  local reset, retry, freed = 0, 0, 0
  if #entries > 0 then reset = tonumber(entries[#entries]) + P - now end
  for i = 1, #entries, 2 do
    freed = freed + tonumber(string.match(entries[i], ':(%d+)$'))
    if used - freed + c <= L then
      retry = tonumber(entries[i + 1]) + P - now
      break
    end
  end
  return false, L - used, retry, reset
end

-- Token bucket and leaky bucket: GCRA. k1: the theoretical arrival time µs
-- (string).
local function gcra(k1, _, L, P, c, C)
  local T = math.floor((P + L - 1) / L)
  local tat = math.max(tonumber(redis.call('GET', k1) or '0'), now)
  local new = tat + c * T
  local allowAt = new - C * T
  local after = tat
  if allowAt <= now then after = new end
  local remaining = math.floor((C * T - (after - now)) / T)
  remaining = math.min(math.max(remaining, 0), C)
  if allowAt > now then
    return false, remaining, allowAt - now, after - now
  end
  return true, remaining, 0, after - now, function()
    redis.call('SET', k1, s(new))
    expireAt(k1, new)
  end
end

-- The algorithms by store.Algorithm, and how many keys each has.
local algorithms = {fixedWindow, slidingWindow, slidingLog, gcra, gcra}
local keysOf = {1, 1, 2, 1, 1}
