-- Adds a message, or finds the one its dedup ID names; wakes the queue.
-- KEYS: see queue_prelude.lua
-- ARGV[4]: message ID  ARGV[5]: encoded message  ARGV[6]: delay µs
-- ARGV[7]: deliver time µs (-1: use the delay)  ARGV[8]: max attempts
-- ARGV[9]: dedup ID ("" none)  ARGV[10]: dedup window µs  ARGV[11]: wake-up channel
-- Returns {OK, message ID, deliver} added; {DUPLICATE, first message ID,
-- its deliver} a duplicate.
upkeep()
local dedup = ARGV[9]
if dedup ~= '' then
  local d = redis.call('HGET', KEYS[8], dedup)
  local exp = redis.call('ZSCORE', KEYS[9], dedup)
  if d and exp and tonumber(exp) > now then
    local id, deliver = string.match(d, '^(.*)|(%d+)$')
    if not id then corrupt('queue dedup record') end
    settle()
    return {DUPLICATE, id, tonumber(deliver)}
  end
end
local id = ARGV[4]
local deliver = now + tonumber(ARGV[6])
if tonumber(ARGV[7]) >= 0 then deliver = math.max(tonumber(ARGV[7]), now) end
local seq = nextSeq()
redis.call('HSET', KEYS[5], id, ARGV[5])
setMeta(id, {seq = seq, attempt = 0, max = tonumber(ARGV[8]), deliver = deliver, enqueued = now, receipt = ''})
redis.call('ZADD', KEYS[1], s(deliver), seq .. id)
if dedup ~= '' then
  redis.call('HSET', KEYS[8], dedup, id .. '|' .. s(deliver))
  redis.call('ZADD', KEYS[9], s(now + tonumber(ARGV[10])), dedup)
  expireDedup()
end
redis.call('SPUBLISH', ARGV[11], '')
settle()
return {OK, id, deliver}
