-- Lists a page of dead letters (dead, or claims that ended on their last
-- attempt and that upkeep left; not the forgotten), oldest death first,
-- then by enqueue order, starting after a position. Changes nothing.
-- Arguments: queueListDeadArgs (queue.go).
-- Returns, per dead letter: its ID, the start of its encoded message (the
-- version byte and up to preview bytes of payload), its payload's size, its
-- attempts, its enqueue µs, its death µs, its priority, its group, its
-- sequence number (16 hex digits). A dead letter's payload is read from its
-- preview record (kDeadPrev), never whole, but for one that died before
-- those were kept, and for a claim that ended on its last attempt and that
-- no upkeep has buried yet (each operation's upkeep buries up to BATCH).
local forgotten = now - deadTTL
-- page returns up to max refs of key (and their scores), between the
-- position (or the forgotten ones) and hi, in order. Refs that died at the
-- position's instant sort by ref (fixed-width sequence number, then ID),
-- so those up to the position are a prefix of them, skipped by count: by
-- the position's rank if its ref is still in key, else by looking at them
-- (then at most BATCH of one instant are told apart).
local function page(key, hi)
  local lo, skip = '(' .. s(forgotten), 0
  if at > forgotten then
    lo = s(at)
    local rank, score = redis.call('ZRANK', key, atRef), redis.call('ZSCORE', key, atRef)
    if rank and tonumber(score) == at then
      skip = rank + 1 - redis.call('ZCOUNT', key, '-inf', '(' .. lo)
    else
      local tie = redis.call('ZRANGEBYSCORE', key, lo, lo, 'LIMIT', 0, BATCH)
      for k = 1, #tie do
        if not before(atRef, at, tie[k], at) then skip = skip + 1 end
      end
    end
  end
  return redis.call('ZRANGEBYSCORE', key, lo, hi, 'WITHSCORES', 'LIMIT', skip, max)
end
local dead, last = page(kDead, '+inf'), page(kLast, s(now))
local out = {}
local i, j = 1, 1
while #out < 9 * max do
  local id, m, b, died, size
  if i <= #dead and (j > #last or before(dead[i], tonumber(dead[i + 1]), last[j], tonumber(last[j + 1]))) then
    id, died = string.sub(dead[i], 17), tonumber(dead[i + 1])
    local p = redis.call('HGET', kDeadPrev, id)
    if p then
      local meta, n, start = string.match(p, '^([^\n]*)\n(%d+)\n(.*)$')
      if not meta then corrupt('queue dead letter preview') end
      m, b, size = parseMeta(meta), start, tonumber(n)
    else
      m, b = deadRecord(id)
      if not m then corrupt('queue dead letter record') end
    end
    i = i + 2
  elseif j <= #last then
    id, died = string.sub(last[j], 17), tonumber(last[j + 1])
    m = getMeta(id)
    if not m then corrupt('queue meta record missing') end
    b = body(id)
    j = j + 2
  else
    break
  end
  table.insert(out, id)
  table.insert(out, string.sub(b, 1, 1 + preview))
  table.insert(out, size or #b - 1)
  table.insert(out, m.attempt)
  table.insert(out, m.enqueued)
  table.insert(out, died)
  table.insert(out, m.prio)
  table.insert(out, m.group)
  table.insert(out, m.seq)
end
return out
