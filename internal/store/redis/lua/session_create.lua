-- Starts a session, on stream epoch 1.
-- KEYS[1]: the session (hash: ttl dl gen seq ld [ix] [closing])
-- KEYS[2]: its holds (hash: "kind:name" -> entry; codec.go)
-- KEYS[3]: its loss reports (hash: seq -> report)
-- ARGV[3]: ttl µs  ARGV[4]: grace µs (how long an expired session is remembered)
-- ARGV[5]: "1" if the session is in its namespace's index (session_index.lua)
-- ARGV[6]: the session's lock-delay µs (0: none)
-- Returns {OK, deadline, now}.
local deadline = now + tonumber(ARGV[3])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('HSET', KEYS[1], 'ttl', ARGV[3], 'dl', s(deadline), 'ix', ARGV[5], 'gen', '1', 'seq', '0', 'ld', ARGV[6])
expireAt(KEYS[1], stepUp(deadline + tonumber(ARGV[4])))
return {OK, deadline, now}
