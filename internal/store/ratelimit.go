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
// Fixed window. Windows are [w*P, (w+1)*P) with w = floor(now/P). State: the
// window w of the count n (a count from an older window is 0). Allowed iff
// n + c <= L. Remaining = L - n (- c if allowed). RetryAfter = (w+1)*P - now
// when denied. ResetAfter = (w+1)*P - now if the count after the call is > 0,
// else 0.
//
// Sliding window. Same windows; state: the counts cur (window w) and prev
// (window w-1), shifted as the windows move (a count two windows old is 0).
// With e = now - w*P, the estimate is est = prev*(P-e)/P + cur (float64,
// computed as (prev*(P-e))/P + cur). Allowed iff est + c <= L; then cur += c.
// Remaining = max(0, floor(L - est - (c if allowed))). RetryAfter is t - now
// for the smallest integer t > now at which the same call would be allowed
// (found in closed form, then corrected by the same admission test at t and
// t-1); it lies in window w or w+1, or is (w+2)*P. ResetAfter = (w+2)*P - now if cur > 0
// after the call, else (w+1)*P - now if prev > 0, else 0.
//
// Sliding log. State: the admissions (t_i, c_i) with t_i > now - P. With
// used = sum c_i, allowed iff used + c <= L; then (now, c) is logged.
// Remaining = L - used (- c if allowed). RetryAfter: walking the entries
// oldest first, the first t_i whose expiry leaves used - (c_1+...+c_i) + c
// <= L gives t_i + P - now. ResetAfter = newest t_i + P - now, or 0 with no
// entries. At most L entries exist, since a denial logs nothing.
//
// Token bucket and leaky bucket: GCRA, in integers. T = ceil(P/L) is the
// emission interval in microseconds (a rate is rounded down by less than a
// microsecond per unit, so that C calls of cost 1 fit a bucket of C exactly).
// State: the theoretical arrival time tat (absent: now). With t0 = max(tat,
// now), new = t0 + c*T and allowAt = new - C*T: allowed iff allowAt <= now;
// then tat = new. With after = new if allowed else t0: Remaining =
// clamp((C*T - (after - now)) / T, 0, C) in integer division, RetryAfter =
// allowAt - now when denied, ResetAfter = after - now. A denial writes
// nothing.
