-- Adds a queue's counts of one minute (store.QueueActivity's
-- RecordQueueActivity): kHist, the queue's hash "minute|kind" -> count
-- (kind e, a, r or d: enqueued, acked, retried, dead), in the queue's
-- slot, whose minutes older than horizon µs are deleted (at most 4 fields
-- a minute of the last hour and a little: bounded), expiring an hour after
-- its last write.
-- Arguments: queueActivityArgs (activity.go).
-- Returns OK.
for i, kind in ipairs({'e', 'a', 'r', 'd'}) do
  if counts[i] > 0 then redis.call('HINCRBY', kHist, s(minute) .. '|' .. kind, s(counts[i])) end
end
local fields = redis.call('HKEYS', kHist)
for _, f in ipairs(fields) do
  local m = tonumber(string.match(f, '^(%d+)|'))
  if not m or m < horizon then redis.call('HDEL', kHist, f) end
end
expireAt(kHist, now + horizonTTL)
return OK
