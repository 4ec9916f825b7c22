-- Sliding log (store/ratelimit.go). At most limit entries exist, since a
-- denial logs nothing, and limit is capped by ratelimit.max_log_limit.
-- Expired entries are removed by the next admission only, so that a peek or
-- a denial changes nothing even if the clock later steps back.
-- KEYS[1]: the log (sorted set: score = time µs, member = "seq:cost")
-- KEYS[2]: its totals (hash: sum seq)
-- ARGV[3]: limit  ARGV[4]: period µs  ARGV[5]: cost  ARGV[6]: "1" to peek
-- Returns {OK allowed or NO denied, remaining, retry after µs, reset after µs}.
local L, P, c = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local horizon = s(now - P)
local used = tonumber(redis.call('HGET', KEYS[2], 'sum') or '0')
local old = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', horizon)
for i = 1, #old do
  used = used - tonumber(string.match(old[i], ':(%d+)$'))
end
if used + c <= L then
  if ARGV[6] ~= '1' then
    if #old > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', horizon) end
    local seq = redis.call('HINCRBY', KEYS[2], 'seq', 1)
    redis.call('ZADD', KEYS[1], s(now), string.format('%016d:%d', seq, c))
    redis.call('HSET', KEYS[2], 'sum', s(used + c))
  end
  -- The latest entry: now, unless the clock stepped back below entries
  -- that stay live until their own time + P.
  local last = now
  local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
  if #newest > 0 then last = math.max(last, tonumber(newest[2])) end
  if ARGV[6] ~= '1' then
    expireAt(KEYS[1], last + P)
    expireAt(KEYS[2], last + P)
  end
  return {OK, L - used - c, 0, last + P - now}
end
local entries = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. horizon, '+inf', 'WITHSCORES')
local reset, retry, freed = 0, 0, 0
if #entries > 0 then reset = tonumber(entries[#entries]) + P - now end
for i = 1, #entries, 2 do
  freed = freed + tonumber(string.match(entries[i], ':(%d+)$'))
  if used - freed + c <= L then
    retry = tonumber(entries[i + 1]) + P - now
    break
  end
end
return {NO, L - used, retry, reset}
