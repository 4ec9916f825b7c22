-- Decides a call against one or more limits of one key at once
-- (store/ratelimit.go, "Several limits"): allowed iff each limit allows it,
-- and only then written to every one (unless a peek); a denial writes
-- nothing. Every limiter of a key shares the key's hash tag.
-- Arguments: limitAllowArgs (limits.go).
-- Returns {OK allowed or NO denied, remaining, retry after µs, reset after
-- µs, the deciding limit's index from 0}.
local c = cost
local allowed, remaining, retry, reset, decided = true, 0, 0, 0, 0
local commits, k = {}, 1
for i = 1, n do
  local a = 4 * (i - 1)
  local alg = params[a + 1]
  local f = algorithms[alg]
  if not f then corrupt('limit algorithm') end
  local ok, rem, ret, res, commit = f(limiterKeys[k], limiterKeys[k + 1], params[a + 2], params[a + 3], c, params[a + 4])
  k = k + keysOf[alg]
  if i == 1 then
    remaining, reset = rem, res
    if not ok then retry = ret end
  else
    if not ok and (allowed or ret > retry) then
      decided, retry = i - 1, ret -- the first denial, or a longer one
    elseif ok and allowed and rem < remaining then
      decided = i - 1
    end
    remaining, reset = math.min(remaining, rem), math.max(reset, res)
  end
  allowed = allowed and ok
  commits[i] = commit
end
if not allowed then return {NO, remaining, retry, reset, decided} end
if not peek then
  for i = 1, n do commits[i]() end
end
return {OK, remaining, 0, reset, decided}
