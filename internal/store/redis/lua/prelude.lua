-- The prelude of every script, after its header (scripts.go), which binds
-- the time arguments every script gets (timeArgs in store.go): now, the
-- time to use in Unix microseconds, or -1 for the Redis server's TIME
-- (production; tests with a simulated clock pass their time), and slack,
-- milliseconds added to every physical expiry: 0 in production; with a
-- simulated clock, keys must outlive their logical lifetime, since Redis
-- expires keys by its own clock.
-- Scripts decide expiry by the deadlines they store, never by a key's
-- existence alone, and set PEXPIRE so that Redis frees what is dead.
-- Numbers pass to redis.call through s(), since Lua's own conversion keeps
-- only 14 digits.
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function s(n) return string.format('%d', n) end
local function expireAt(key, deadline)
  if deadline <= now and slack == 0 then
    redis.call('DEL', key)
    return
  end
  -- A millisecond more than the deadline, rounded up: Redis never frees a key
  -- before its logical end, whatever its own clock's resolution.
  local ms = math.ceil((deadline - now) / 1000) + 1 + slack
  if ms > 0 then
    redis.call('PEXPIRE', key, s(ms))
  else
    redis.call('DEL', key)
  end
end
-- Keys whose lifetime follows a deadline that heartbeats push forward (a
-- session's keys, its holds' keys) expire at what they need rounded up to
-- a whole step: a renewal moves their TTL only when that crosses into the
-- next step (about one heartbeat in nine at a third of a 10 s TTL), and
-- they outlive their need by less than a step.
local expiryStep = 30000000
local function stepUp(t) return t - t % expiryStep + expiryStep end
-- Reply codes: the first value of most replies, named alike in reply.go.
local NO, OK, SESSION_GONE, ALREADY_HELD, FULL = 0, 1, -1, -2, -3
local SESSION_BOUND, CLOSING, SUPERSEDED, EXPIRED = -4, -5, -6, -7
local MISMATCH, DUPLICATE, DEAD, REPLACED = -8, 3, 4, 5
local LIMIT_MISMATCH, TOO_MANY_WAITERS, NOT_LEADER = -9, -10, -11
local QUEUE_FULL, MEMORY_HIGH, ASK, SLOW = -12, -13, -14, -15
-- Loss reasons, as store.LossReason.
local lostMaxHold, lostExpired, lostGone = 1, 2, 3
-- A session's loss report of the hold whose field ("kind:name") is given
-- (decoded by decodeReport in codec.go).
local function lossReport(reason, fence, field)
  return s(reason) .. ' ' .. fence .. ' ' .. field
end
-- corrupt ends the script with a CORRUPT error: a stored record it cannot
-- read (what names it, never quoting it), which coordd reports as a bug
-- (errCorrupt), never misreading it. Redis keeps what a script wrote
-- before the error: a script reads an object's records before it changes
-- that object.
local function corrupt(what)
  error({err = 'CORRUPT ' .. what})
end
