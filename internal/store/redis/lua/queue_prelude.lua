-- The prelude of every queue script, after the common one. A queue's keys,
-- all under the queue's hash tag:
-- KEYS[1] ready     list of refs, claimed from the head
-- KEYS[2] delayed   sorted set of refs by deliver time µs
-- KEYS[3] inflight  sorted set of refs by claim deadline µs
-- KEYS[4] dead      list of refs, oldest first
-- KEYS[5] msg       hash: message ID -> the encoded message (codec.go)
-- KEYS[6] meta      hash: message ID ->
--                   "seq|attempt|max attempts|deliver µs|enqueue µs|receipt"
-- KEYS[7] dedup     hash: dedup ID -> "message ID|deliver µs"
-- KEYS[8] dedupexp  sorted set of dedup IDs by expiry µs
-- KEYS[9] seq       the enqueue counter
-- A ref is the message's sequence number (16 hex digits) followed by its
-- ID, so that messages due at the same instant keep their enqueue order.
local BATCH = 1000

local function getMeta(id)
  local m = redis.call('HGET', KEYS[6], id)
  if not m then return nil end
  local seq, attempt, max, deliver, enqueued, receipt = string.match(m, '^(%x+)|(%d+)|(%d+)|(%d+)|(%d+)|(.*)$')
  return {seq = seq, attempt = tonumber(attempt), max = tonumber(max), deliver = tonumber(deliver),
    enqueued = tonumber(enqueued), receipt = receipt}
end

local function setMeta(id, m)
  redis.call('HSET', KEYS[6], id, m.seq .. '|' .. s(m.attempt) .. '|' .. s(m.max) .. '|' .. s(m.deliver) ..
    '|' .. s(m.enqueued) .. '|' .. m.receipt)
end

-- upkeep makes due delayed messages ready and returns expired claims to
-- ready or the dead letters, at most BATCH in all, and forgets expired dedup
-- IDs, at most BATCH.
local function upkeep()
  local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', s(now), 'LIMIT', 0, BATCH)
  for i = 1, #due do
    redis.call('ZREM', KEYS[2], due[i])
    redis.call('RPUSH', KEYS[1], due[i])
  end
  if #due < BATCH then
    local expired = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', s(now), 'LIMIT', 0, BATCH - #due)
    for i = 1, #expired do
      local ref = expired[i]
      local id = string.sub(ref, 17)
      local m = getMeta(id)
      redis.call('ZREM', KEYS[3], ref)
      m.receipt = ''
      setMeta(id, m)
      if m.attempt >= m.max then
        redis.call('RPUSH', KEYS[4], ref)
      else
        redis.call('RPUSH', KEYS[1], ref)
      end
    end
  end
  local old = redis.call('ZRANGEBYSCORE', KEYS[8], '-inf', s(now), 'LIMIT', 0, BATCH)
  for i = 1, #old do
    redis.call('HDEL', KEYS[7], old[i])
    redis.call('ZREM', KEYS[8], old[i])
  end
end

-- claimed returns the ID, meta and ref of the message of a live claim, or
-- nil. Call upkeep first.
local function claimed(receipt)
  local id = string.sub(receipt, 1, 32)
  local m = getMeta(id)
  if not m or m.receipt ~= receipt then return nil end
  local ref = m.seq .. id
  local deadline = redis.call('ZSCORE', KEYS[3], ref)
  if not deadline or tonumber(deadline) <= now then return nil end
  return id, m, ref
end

-- nextDue is µs until the next delayed message is due or claim expires; 0: none.
local function nextDue()
  local due = 0
  local d = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if #d > 0 then due = tonumber(d[2]) end
  local f = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  if #f > 0 and (due == 0 or tonumber(f[2]) < due) then due = tonumber(f[2]) end
  if due == 0 then return 0 end
  return math.max(due - now, 1)
end
