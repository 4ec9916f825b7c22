package store

// The rate-limiting algorithms, specified exactly, so that every backend
// makes the same decisions to the microsecond (the memory backend in Go, the
// Redis backend in Lua, both in float64 where a float is needed, evaluated in
// the order written here).
//
// Notation: now is the store's time in Unix microseconds; P the period in
// microseconds; L the limit; c the cost; C = Limit.Capacity(). Every decision
// is computed as if the call were made, and written only if allowed and not a
// peek, so a peek answers exactly what the call would get. "Remaining" and
// "reset" describe the state after the call (or, for a denial, the unchanged
// state).
//
// A step back of the store's clock (a failover to a master whose clock is
// behind, an NTP correction) never forgets what was taken: state stamped
// later than now still counts as current. The windows keep the later window
// as the current one, the sliding log keeps its entries until t_i + P, and
// the buckets keep tat. So a step back only makes a limiter stricter, in
// real time, for as long as the clock was set back, and the bounds below
// hold through it. A state is kept until the store's clock passes its
// lifetime, and may be dropped at any time after: fixed window (ws+2)*P,
// a period past its window, so that a step back finds every count less than
// a period old; sliding window (ws+2)*P; sliding log the latest t_i + P;
// buckets tat. Only an allowed call that is not a peek writes state.
//
// Fixed window. Windows are [w*P, (w+1)*P). State: the window ws of the
// count n. The current window is w = max(floor(now/P), ws): a later window
// stays current after a step back. The count is n if ws = w, else 0 (an
// older window's count is 0). Allowed iff n + c <= L. Remaining = L - n (- c
// if allowed). RetryAfter = (w+1)*P - now when denied. ResetAfter = (w+1)*P -
// now if the count after the call is > 0, else 0. An allowed call stores
// window w. At most L per window, so at most 2L in any P of the store's
// time, and of real time through any step back.
//
// Sliding window. Same windows; state: the counts cur (window ws) and prev
// (window ws-1), shifted as the windows move (a count two windows old is 0).
// The current window is w = max(floor(now/P), ws) as above, and e = max(0,
// now - w*P): a later window, kept current by a step back, is decided as at
// its start, where prev weighs most. The estimate is est = prev*(P-e)/P +
// cur (float64, computed as (prev*(P-e))/P + cur). Allowed iff est + c <= L;
// then cur += c, stored as window w. Remaining = max(0, floor(L - est - (c if
// allowed))). RetryAfter is t - now for the smallest integer t > now at
// which the same call would be allowed (found in closed form, then
// corrected by the same admission test at t and t-1); it lies in window w
// or w+1, or is (w+2)*P. ResetAfter = (w+2)*P - now if cur > 0 after the
// call, else (w+1)*P - now if prev > 0, else 0.
//
// Sliding log. State: the admissions (t_i, c_i), ordered by t_i (equal
// times in the order logged; after a step back an admission is logged
// before later ones); those with t_i > now - P count. With used = sum c_i
// of those, allowed iff used + c <= L; then the others are removed and (now,
// c) is logged. Remaining = L - used (- c if allowed). RetryAfter: walking
// the counted entries in order, the first t_i whose expiry leaves used -
// (c_1+...+c_i) + c <= L gives t_i + P - now.
// ResetAfter = the latest t_i (after the call) + P - now, or 0 with no
// entries; that is P for an allowed call, unless a step back left later
// entries. At most L entries exist, since a denial logs nothing.
//
// Which rates are exact. The windows and the log count units per period of
// whole microseconds, so every L and P is exact for them, more than one unit
// per microsecond included. The buckets admit a unit every T microseconds,
// exact only if L divides P; internal/limiter refuses any other limit of a
// bucket (INVALID_ARGUMENT: a rate is never rounded), and a period that is
// not a whole number of microseconds for every algorithm. The store itself
// takes any valid Limit and, for a bucket that L does not divide, rounds the
// interval up as below.
//
// Token bucket and leaky bucket: GCRA, in integers. T = ceil(P/L) is the
// emission interval in microseconds: P/L for every limit the limiter
// accepts (otherwise the rate is rounded down, so that C calls of cost 1
// still fit a bucket of C exactly).
// State: the theoretical arrival time tat (absent: now). With t0 = max(tat,
// now), new = t0 + c*T and allowAt = new - C*T: allowed iff allowAt <= now;
// then tat = new. With after = new if allowed else t0: Remaining =
// clamp((C*T - (after - now)) / T, 0, C) in integer division, RetryAfter =
// allowAt - now when denied, ResetAfter = after - now. A denial writes
// nothing.
//
// Several limits (AllowAll). Each limit is decided as above, alone, at the
// same now with the same cost; the call is allowed iff every one allows it,
// and only then is every one's state written (unless a peek). Remaining is
// the least of the limits' Remaining; RetryAfter, when denied, the longest
// RetryAfter among the denying limits (nothing but time makes a limit
// admit sooner, and a limit that allows now allows later too, so the same
// call succeeds then unless something else consumed); ResetAfter the
// longest of all. The deciding limit is that denying one (the first of
// equals), or, allowed, the one with the least Remaining (the first of
// equals).
//
// Counting hits (CountHits: Envoy's rate limit service, internal/envoyrl).
// A counter of key under period P has the fixed window's windows and state:
// the window ws of the count n, the current window w = max(floor(now/P),
// ws), the count n if ws = w, else 0. A call adds its hits h to it, whatever
// the count: there is no limit here, the caller compares the count after
// with its own, so the hits of a request over the limit count too, as in
// envoy ratelimit; the count stops at MaxHitCount. h = 0 reads the count
// and writes nothing. The answer is the count after and now. The state is
// kept until (w+2)*P, as the fixed window's.
