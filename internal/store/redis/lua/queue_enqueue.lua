-- Adds a message, or finds the one its dedup ID names; wakes the queue. A
-- message of a group whose head is taken waits behind it (gwait).
-- KEYS: see queue_prelude.lua
-- ARGV[5]: message ID  ARGV[6]: encoded message  ARGV[7]: delay µs
-- ARGV[8]: deliver time µs (-1: use the delay)  ARGV[9]: max attempts
-- ARGV[10]: dedup ID ("" none)  ARGV[11]: dedup window µs
-- ARGV[12]: priority (0 to 9)  ARGV[13]: group ("" none)
-- Returns {OK, message ID, deliver} added; {DUPLICATE, first message ID,
-- its deliver} a duplicate.
local dedup = ARGV[10]
if dedup ~= '' then
  local d = redis.call('HGET', KEYS[8], dedup)
  local exp = d and redis.call('ZSCORE', KEYS[9], dedup)
  if exp and tonumber(exp) > now then
    local id, deliver = string.match(d, '^(.*)|(%d+)$')
    if not id then corrupt('queue dedup record') end
    return {DUPLICATE, id, tonumber(deliver)}
  end
end
local id, group = ARGV[5], ARGV[13]
local deliver = now + tonumber(ARGV[7])
if tonumber(ARGV[8]) >= 0 then deliver = math.max(tonumber(ARGV[8]), now) end
local m = {seq = nextSeq(), attempt = 0, max = tonumber(ARGV[9]), deliver = deliver, enqueued = now,
  prio = tonumber(ARGV[12]), group = group, receipt = ''}
local ref = m.seq .. id
redis.call('HSET', KEYS[5], id, ARGV[6])
setMeta(id, m)
if group == '' or redis.call('HSETNX', KEYS[12], group, ref) == 1 then
  place(ref, m, deliver)
else
  redis.call('ZADD', KEYS[13], 0, group .. '\0' .. ref)
end
if dedup ~= '' then
  redis.call('HSET', KEYS[8], dedup, id .. '|' .. s(deliver))
  redis.call('ZADD', KEYS[9], s(now + tonumber(ARGV[11])), dedup)
  expireDedup()
end
redis.call('SPUBLISH', wakeChannel, '')
persist() -- settle, knowing the queue has a live message: this one
return {OK, id, deliver}
