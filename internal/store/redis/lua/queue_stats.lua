-- Counts a queue's messages by state, by their scores: exact whatever
-- upkeep has done so far. A message waiting behind its group's head counts
-- as delayed.
-- Arguments: queueArgs (queue.go).
-- Returns {ready, delayed, in flight, dead, paused (0 or 1)}.
local t, after, kept = s(now), '(' .. s(now), '(' .. s(now - deadTTL)
return {
  redis.call('ZCARD', kReady) + redis.call('ZCOUNT', kPending, '-inf', t) + redis.call('ZCOUNT', kInflight, '-inf', t),
  redis.call('ZCOUNT', kPending, after, '+inf') + redis.call('ZCARD', kGroupWait),
  redis.call('ZCOUNT', kInflight, after, '+inf') + redis.call('ZCOUNT', kLast, after, '+inf'),
  redis.call('ZCOUNT', kDead, kept, '+inf') + redis.call('ZCOUNT', kLast, kept, t),
  redis.call('HEXISTS', kConf, 'p'),
}
