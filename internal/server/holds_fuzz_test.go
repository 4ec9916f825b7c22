package server

// Fuzz targets of the semaphore's and the election's requests, with the
// properties and seed table of handlers_fuzz_test.go: every answer is OK,
// INVALID_ARGUMENT naming one of the request's fields (and then no store
// call was made), FAILED_PRECONDITION or RESOURCE_EXHAUSTED; valid seeds
// are accepted, invalid ones refused; what a success implies holds.

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/token"
)

// Arguments: name, owner, session_id, a real session, limit, ttl, wait,
// max_hold (set, seconds, nanos), twice.
var fuzzAcquireSeeds = []fuzzSeed{
	{"defaults", true, []any{"pool", "", "", false, int32(1), false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"limit_1000", true, []any{"pool", "", "", false, int32(1000), false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"limit_1001", false, []any{"pool", "", "", false, int32(1001), false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"limit_0", false, []any{"pool", "", "", false, int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"limit_negative", false, []any{"pool", "", "", false, int32(-1), false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"session_twice", true, []any{"pool", "job", "", true, int32(2), false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), true}},
	{"session_with_ttl", false, []any{"pool", "job", "", true, int32(2), true, int64(5), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"ttl_10s_wait_1s", true, []any{"pool", "job", "", false, int32(3), true, int64(10), int32(0), true, int64(1), int32(0), false, int64(0), int32(0), false}},
	{"ttl_2h", false, []any{"pool", "", "", false, int32(3), true, int64(7200), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"wait_2m", false, []any{"pool", "", "", false, int32(3), false, int64(0), int32(0), true, int64(120), int32(0), false, int64(0), int32(0), false}},
	{"max_hold_1h", true, []any{"pool", "", "", false, int32(3), false, int64(0), int32(0), false, int64(0), int32(0), true, int64(3600), int32(0), false}},
	{"max_hold_0", false, []any{"pool", "", "", false, int32(3), false, int64(0), int32(0), false, int64(0), int32(0), true, int64(0), int32(0), false}},
	{"name_empty", false, []any{"", "", "", false, int32(1), false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"name_control", false, []any{"po\nol", "", "", false, int32(1), false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"owner_bidi", false, []any{"pool", "a\u202eb", "", false, int32(1), false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"session_malformed", false, []any{"pool", "", "not-a-token", false, int32(1), false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
	{"session_unknown", true, []any{"pool", "", strings.Repeat("ab", 16), false, int32(1), false, int64(0), int32(0), false, int64(0), int32(0), false, int64(0), int32(0), false}},
}

func FuzzAcquireRequest(f *testing.F) {
	valid, invalid := addSeeds(f, fuzzAcquireSeeds)
	f.Fuzz(func(t *testing.T, name, owner, sessionID string, realSession bool, limit int32,
		ttlSet bool, ttlS int64, ttlN int32, waitSet bool, waitS int64, waitN int32,
		holdSet bool, holdS int64, holdN int32, twice bool) {
		seed := seedKey(name, owner, sessionID, realSession, limit, ttlSet, ttlS, ttlN, waitSet, waitS, waitN, holdSet, holdS, holdN, twice)
		known, bad := valid[seed], invalid[seed]
		e := newFuzzEnv(t)
		sems := &semaphoreServer{svc: e.svc.Semaphores, metrics: fuzzMetrics()}
		if realSession {
			st, err := e.svc.Sessions.Open(e.ctx, DefaultNamespace, "", 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			sessionID = st.ID
		}
		req := &coordv1.AcquireRequest{Name: name, Owner: owner, SessionId: sessionID, Limit: limit,
			Ttl: dur(ttlSet, ttlS, ttlN), Wait: dur(waitSet, waitS, waitN), MaxHold: dur(holdSet, holdS, holdN)}
		fields := []string{"name", "owner", "session_id", "limit", "ttl", "wait", "max_hold"}
		var tok string
		for i := 0; i < 1+btoi(twice); i++ {
			resp, code, err := fuzzCall(e, "Acquire", func() (*coordv1.AcquireResponse, error) { return sems.Acquire(e.ctx, req) }, fields...)
			e.accepted(known, "a valid seed", "Acquire", code, err, req)
			e.refused(bad, "Acquire", code, err, req)
			e.accepted(i > 0, "accepted the first time", "Acquire", code, err, req)
			if code != codes.OK {
				return
			}
			e.must(resp.GetHolders() <= uint32(max(limit, 0)) && resp.GetLimit() == limit, "Acquire", "%v: more holders than the limit %d", resp, limit)
			if !resp.GetAcquired() {
				e.must(i > 0 && limit == 1 && resp.GetToken() == "", "Acquire", "a free permit was not acquired: %v", resp)
				continue
			}
			if i > 0 && realSession {
				e.must(resp.GetAlreadyHeld() && resp.GetToken() == tok, "Acquire", "again by its session: %v, want its grant", resp)
				continue
			}
			e.must(token.Valid(resp.GetToken()) && resp.GetFence() > 0 && !resp.GetAlreadyHeld(), "Acquire", "response %v", resp)
			tok = resp.GetToken()
		}
		info, code, _ := fuzzCall(e, "GetSemaphore", func() (*coordv1.GetSemaphoreResponse, error) {
			return sems.GetSemaphore(e.ctx, &coordv1.GetSemaphoreRequest{Name: name})
		}, "name")
		if code == codes.OK {
			e.must(len(info.GetHolders()) >= 1 && len(info.GetHolders()) <= int(limit) && info.GetLimit() == limit,
				"GetSemaphore", "after a grant of limit %d: %v", limit, info)
		}
		rel, code, _ := fuzzCall(e, "Release", func() (*coordv1.SemaphoreServiceReleaseResponse, error) {
			return sems.Release(e.ctx, &coordv1.SemaphoreServiceReleaseRequest{Name: name, Token: tok})
		}, "name", "token")
		if code == codes.OK {
			e.must(rel.GetReleased(), "Release", "of the permit just granted: %v", rel)
		}
	})
}

// Arguments: name, value, session_id, a real session, wait (set, seconds,
// nanos), twice.
var fuzzCampaignSeeds = []fuzzSeed{
	{"elected", true, []any{"leader", []byte("node-a"), "", true, false, int64(0), int32(0), true}},
	{"wait_1s", true, []any{"leader", []byte("node-a"), "", true, true, int64(1), int32(0), false}},
	{"wait_2m", false, []any{"leader", []byte("node-a"), "", true, true, int64(120), int32(0), false}},
	{"wait_negative", false, []any{"leader", []byte("node-a"), "", true, true, int64(-1), int32(0), false}},
	{"no_session", false, []any{"leader", []byte("node-a"), "", false, false, int64(0), int32(0), false}},
	{"session_malformed", false, []any{"leader", []byte("node-a"), "xyz", false, false, int64(0), int32(0), false}},
	{"session_unknown", true, []any{"leader", []byte("node-a"), strings.Repeat("cd", 16), false, false, int64(0), int32(0), false}},
	{"value_empty", false, []any{"leader", []byte{}, "", true, false, int64(0), int32(0), false}},
	{"value_4096", true, []any{"leader", []byte(strings.Repeat("v", 4096)), "", true, false, int64(0), int32(0), false}},
	{"value_4097", false, []any{"leader", []byte(strings.Repeat("v", 4097)), "", true, false, int64(0), int32(0), false}},
	{"value_binary", true, []any{"leader", []byte{0, 0xff, '\n'}, "", true, false, int64(0), int32(0), false}},
	{"name_empty", false, []any{"", []byte("v"), "", true, false, int64(0), int32(0), false}},
	{"name_zero_width", false, []any{"lea\u200bder", []byte("v"), "", true, false, int64(0), int32(0), false}},
}

func FuzzCampaignRequest(f *testing.F) {
	valid, invalid := addSeeds(f, fuzzCampaignSeeds)
	f.Fuzz(func(t *testing.T, name string, value []byte, sessionID string, realSession bool,
		waitSet bool, waitS int64, waitN int32, twice bool) {
		seed := seedKey(name, value, sessionID, realSession, waitSet, waitS, waitN, twice)
		known, bad := valid[seed], invalid[seed]
		e := newFuzzEnv(t)
		elect := &electionServer{svc: e.svc.Elections, metrics: fuzzMetrics()}
		if realSession {
			st, err := e.svc.Sessions.Open(e.ctx, DefaultNamespace, "", 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			sessionID = st.ID
		}
		req := &coordv1.CampaignRequest{Name: name, Value: value, SessionId: sessionID, Wait: dur(waitSet, waitS, waitN)}
		var tok string
		var fence uint64
		for i := 0; i < 1+btoi(twice); i++ {
			resp, code, err := fuzzCall(e, "Campaign", func() (*coordv1.CampaignResponse, error) { return elect.Campaign(e.ctx, req) },
				"name", "value", "session_id", "wait")
			e.accepted(known, "a valid seed", "Campaign", code, err, req)
			e.refused(bad, "Campaign", code, err, req)
			e.accepted(i > 0, "accepted the first time", "Campaign", code, err, req)
			if code != codes.OK {
				return
			}
			e.must(realSession, "Campaign", "without a live session: %v", resp)
			if i > 0 {
				e.must(resp.GetAlreadyLeader() && resp.GetToken() == tok && resp.GetFence() == fence, "Campaign", "again by its leader: %v", resp)
				continue
			}
			e.must(resp.GetElected() && token.Valid(resp.GetToken()) && resp.GetFence() > 0, "Campaign", "of a free election: %v", resp)
			tok, fence = resp.GetToken(), resp.GetFence()
		}
		l, code, _ := fuzzCall(e, "Leader", func() (*coordv1.LeaderResponse, error) {
			return elect.Leader(e.ctx, &coordv1.LeaderRequest{Name: name})
		}, "name")
		if code == codes.OK {
			e.must(l.GetHasLeader() && string(l.GetLeader().GetValue()) == string(value) && l.GetLeader().GetFence() == fence,
				"Leader", "after the campaign: %v", l)
		}
		r, code, _ := fuzzCall(e, "Resign", func() (*coordv1.ResignResponse, error) {
			return elect.Resign(e.ctx, &coordv1.ResignRequest{Name: name, Token: tok})
		}, "name", "token")
		if code == codes.OK {
			e.must(r.GetResigned(), "Resign", "by the leader: %v", r)
		}
	})
}
