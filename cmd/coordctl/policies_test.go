package main

import "testing"

// policy put, list and delete manage the namespace's runtime policies,
// which allow then names; bad input is refused naming the field.
func TestPolicies(t *testing.T) {
	t.Parallel()
	c := newCtl(t, startDaemon(t))
	want(t, c.run("policy", "put", "per-user", "--algorithm", "fixed_window", "--limit", "1", "--period", "1h", "--on-store-failure", "local"), 0, "created=true", "")
	want(t, c.run("allow", "k", "--policy", "per-user"), 0, "allowed", "")
	want(t, c.run("allow", "k", "--policy", "per-user"), 1, "denied", "")
	want(t, c.run("policy", "put", "partner", "--limits", "second=token_bucket:10/1s", "--limits", "day=fixed_window:1000/24h", "--shadow"), 0, "created=true", "")
	want(t, c.run("policy", "list"), 0,
		`source=runtime name="partner" limits=second=token_bucket:10/1s,day=fixed_window:1000/24h0m0s on_store_failure=fail_closed shadow=true local_quota=0`, "")
	want(t, c.run("policy", "list"), 0, `source=runtime name="per-user" limits=fixed_window:1/1h0m0s on_store_failure=local`, "")
	want(t, c.run("policy", "put", "bad", "--algorithm", "fixed_window", "--limit", "0", "--period", "1s"), 1, "", "policy.limit.limit")
	want(t, c.run("policy", "put", "bad", "--limits", "day"), 2, "", "NAME=ALGORITHM")
	want(t, c.run("policy", "put", "bad", "--algorithm", "fixed_window", "--limit", "1", "--period", "1s", "--on-store-failure", "open"), 2, "", "fail_closed, fail_open, local")
	want(t, c.run("policy", "delete", "per-user"), 0, "deleted=true", "")
	want(t, c.run("allow", "k", "--policy", "per-user"), 1, "", "policy")
	want(t, c.run("policy", "delete", "partner"), 0, "deleted=true", "")
	want(t, c.run("policy", "list"), 0, "", "no policies")
	want(t, c.run("policy", "frobnicate"), 2, "", "put, delete or list")
}
