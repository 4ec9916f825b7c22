-- Adds a message, or finds the one its dedup ID names; wakes the queue.
-- KEYS: see queue_prelude.lua
-- ARGV[3]: message ID  ARGV[4]: encoded message  ARGV[5]: delay µs
-- ARGV[6]: deliver time µs (-1: use the delay)  ARGV[7]: max attempts
-- ARGV[8]: dedup ID ("" none)  ARGV[9]: dedup window µs  ARGV[10]: wake-up channel
-- Returns {0, message ID, deliver} added; {1, first message ID, its deliver}
-- a duplicate.
upkeep()
local dedup = ARGV[8]
if dedup ~= '' then
  local d = redis.call('HGET', KEYS[7], dedup)
  local exp = redis.call('ZSCORE', KEYS[8], dedup)
  if d and exp and tonumber(exp) > now then
    local id, deliver = string.match(d, '^(.*)|(%d+)$')
    return {1, id, tonumber(deliver)}
  end
end
local id = ARGV[3]
local deliver = now + tonumber(ARGV[5])
if tonumber(ARGV[6]) >= 0 then deliver = math.max(tonumber(ARGV[6]), now) end
local seq = string.format('%016x', redis.call('INCR', KEYS[9]))
redis.call('HSET', KEYS[5], id, ARGV[4])
setMeta(id, {seq = seq, attempt = 0, max = tonumber(ARGV[7]), deliver = deliver, enqueued = now, receipt = ''})
if deliver > now then
  redis.call('ZADD', KEYS[2], s(deliver), seq .. id)
else
  redis.call('RPUSH', KEYS[1], seq .. id)
end
if dedup ~= '' then
  redis.call('HSET', KEYS[7], dedup, id .. '|' .. s(deliver))
  redis.call('ZADD', KEYS[8], s(now + tonumber(ARGV[9])), dedup)
end
redis.call('SPUBLISH', ARGV[10], '')
return {0, id, deliver}
