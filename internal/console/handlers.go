package console

import (
	"cmp"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/store"
)

// The JSON the console sends. Each type lists its fields: none of them is
// a token, a receipt or a session ID.

type queueJSON struct {
	Name        string         `json:"name"`
	Ready       int64          `json:"ready"`
	Delayed     int64          `json:"delayed"`
	InFlight    int64          `json:"in_flight"`
	Dead        int64          `json:"dead"`
	Paused      bool           `json:"paused"`
	MaxInFlight int32          `json:"max_in_flight,omitempty"`
	ClaimRate   string         `json:"claim_rate,omitempty"` // "limit/period"
	Schedules   []scheduleJSON `json:"schedules,omitempty"`
	// History: the last hour's minutes with counts, oldest first (none
	// without the store's activity, or beyond the first maxCharts queues).
	History []minuteJSON `json:"history,omitempty"`
	Error   string       `json:"error,omitempty"`
}

type scheduleJSON struct {
	Name     string    `json:"name"`
	Spec     string    `json:"spec"`
	TimeZone string    `json:"time_zone,omitempty"`
	LastTime time.Time `json:"last_time"`
	NextTime time.Time `json:"next_time,omitzero"`
}

type minuteJSON struct {
	Minute   time.Time `json:"minute"`
	Enqueued int64     `json:"enqueued"`
	Acked    int64     `json:"acked"`
	Retried  int64     `json:"retried"`
	Dead     int64     `json:"dead"`
}

type deadLetterJSON struct {
	MessageID   string    `json:"message_id"`
	Preview     string    `json:"preview"`
	Binary      bool      `json:"binary,omitempty"` // Preview is base64
	Size        int64     `json:"size"`
	Attempts    int32     `json:"attempts"`
	EnqueueTime time.Time `json:"enqueue_time"`
	DeadTime    time.Time `json:"dead_time"`
	Priority    int32     `json:"priority,omitempty"`
	Group       string    `json:"group,omitempty"`
}

type holderJSON struct {
	Owner        string  `json:"owner"`
	Fence        string  `json:"fence"` // a string: fences pass 2^53
	TTLSeconds   float64 `json:"ttl_seconds"`
	Shared       bool    `json:"shared,omitempty"`
	SessionBound bool    `json:"session_bound,omitempty"`
}

type limitJSON struct {
	Name      string `json:"name,omitempty"`
	Algorithm string `json:"algorithm"`
	Limit     int64  `json:"limit"`
	Period    string `json:"period"`
	Burst     int64  `json:"burst,omitempty"`
}

type policyJSON struct {
	Name           string      `json:"name"`
	Limits         []limitJSON `json:"limits"`
	Shadow         bool        `json:"shadow"`
	OnStoreFailure string      `json:"on_store_failure"` // fail_closed, fail_open or local
	LocalQuota     int64       `json:"local_quota,omitempty"`
}

type nodeJSON struct {
	Index     int     `json:"index"`
	Addr      string  `json:"addr,omitempty"` // left out with auth on
	Role      string  `json:"role"`
	Reachable bool    `json:"reachable"`
	LatencyMS float64 `json:"latency_ms"`
	Breaker   string  `json:"breaker"` // "closed", "open" or "none"
}

type streamsJSON struct {
	Namespace string `json:"namespace"`
	KeepAlive int    `json:"keepalive"`
	Waiting   int    `json:"waiting"`
}

func (c *Console) queueClient(ns string) coordv1.QueueServiceClient {
	return coordv1.NewQueueServiceClient(c.o.Local.Conn(ns))
}

// queues: the counts, settings, schedules and last hour of the
// namespace's queues: those any instance served lately (the store's
// registry), those this instance has served, those configured, those with
// a schedule, and those the page asks for (name=…).
func (c *Console) queues(r request) (any, error) {
	extra := r.URL.Query()["name"]
	if len(extra) > maxExtraQueues {
		return nil, badRequest{"name: at most 50 queue names"}
	}
	var active []string
	if c.o.Activity != nil {
		var err error
		if active, err = c.o.Activity.ActiveQueues(r.ctx, r.ns); err != nil {
			return nil, err
		}
	}
	scheds := map[string][]scheduleJSON{}
	ls, err := c.queueClient(r.ns).ListSchedules(r.ctx, &coordv1.ListSchedulesRequest{})
	if err != nil {
		return nil, err
	}
	var scheduled []string
	for _, s := range ls.GetSchedules() {
		scheduled = append(scheduled, s.GetQueue())
		scheds[s.GetQueue()] = append(scheds[s.GetQueue()], scheduleJSON{Name: s.GetName(), Spec: s.GetSpec(), TimeZone: s.GetTimeZone(),
			LastTime: s.GetLastTime().AsTime(), NextTime: timeOrZero(s.GetNextTime())})
	}
	all := names(active, c.o.Local.Queues(r.ns), c.o.Queues[r.ns], scheduled, extra)
	out := make([]queueJSON, 0, len(all))
	for i, q := range all {
		j := queueJSON{Name: q, Schedules: scheds[q]}
		if err := c.queueState(r, &j, i < maxCharts); err != nil {
			j.Error = message(err)
		}
		out = append(out, j)
	}
	return map[string]any{"queues": out}, nil
}

// maxCharts bounds the queues whose history one refresh reads.
const maxCharts = 100

// queueState fills j with the queue's counts, settings and, with chart,
// its last hour.
func (c *Console) queueState(r request, j *queueJSON, chart bool) error {
	qc := c.queueClient(r.ns)
	st, err := qc.Stats(r.ctx, &coordv1.StatsRequest{Queue: j.Name})
	if err != nil {
		return err
	}
	j.Ready, j.Delayed, j.InFlight, j.Dead, j.Paused = st.GetReady(), st.GetDelayed(), st.GetInFlight(), st.GetDead(), st.GetPaused()
	qs, err := qc.GetQueueSettings(r.ctx, &coordv1.GetQueueSettingsRequest{Queue: j.Name})
	if err != nil {
		return err
	}
	j.MaxInFlight = qs.GetSettings().GetMaxInFlight()
	if cr := qs.GetSettings().GetClaimRate(); cr != nil {
		j.ClaimRate = fmt.Sprintf("%d/%s", cr.GetLimit(), cr.GetPeriod().AsDuration())
	}
	if !chart || c.o.Activity == nil {
		return nil
	}
	h, err := c.o.Activity.QueueHistory(r.ctx, r.ns, j.Name, time.Now().Add(-store.ActivityHistory))
	if err != nil {
		return err
	}
	for _, m := range h {
		j.History = append(j.History, minuteJSON{Minute: m.Minute, Enqueued: m.Enqueued, Acked: m.Acked, Retried: m.Retried, Dead: m.Dead})
	}
	return nil
}

// timeOrZero is t, or the zero time for none.
func timeOrZero(t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.AsTime()
}

// pause pauses or resumes a queue.
func (c *Console) pause(r request) (any, error) {
	var body struct {
		Queue  string `json:"queue"`
		Paused bool   `json:"paused"`
	}
	if err := decode(r, &body); err != nil {
		return nil, err
	}
	qc := c.queueClient(r.ns)
	var s *coordv1.QueueSettings
	var err error
	if body.Paused {
		var resp *coordv1.PauseQueueResponse
		resp, err = qc.PauseQueue(r.ctx, &coordv1.PauseQueueRequest{Queue: body.Queue})
		s = resp.GetSettings()
	} else {
		var resp *coordv1.ResumeQueueResponse
		resp, err = qc.ResumeQueue(r.ctx, &coordv1.ResumeQueueRequest{Queue: body.Queue})
		s = resp.GetSettings()
	}
	c.o.Log.Info("console: pause", "namespace", r.ns, "queue", body.Queue, "paused", body.Paused, "err", err)
	if err != nil {
		return nil, err
	}
	return map[string]any{"paused": s.GetPaused()}, nil
}

func (c *Console) deadLetters(r request) (any, error) {
	q := r.URL.Query()
	resp, err := c.queueClient(r.ns).ListDeadLetters(r.ctx, &coordv1.ListDeadLettersRequest{
		Queue: q.Get("queue"), PageSize: 50, PageToken: q.Get("page_token"), PreviewBytes: previewBytes,
	})
	if err != nil {
		return nil, err
	}
	out := make([]deadLetterJSON, 0, len(resp.GetDeadLetters()))
	for _, d := range resp.GetDeadLetters() {
		j := deadLetterJSON{
			MessageID: d.GetMessageId(), Size: d.GetPayloadSize(), Attempts: d.GetAttempts(),
			EnqueueTime: d.GetEnqueueTime().AsTime(), DeadTime: d.GetDeadTime().AsTime(),
			Priority: d.GetPriority(), Group: d.GetGroup(),
		}
		if p := d.GetPayloadPreview(); utf8.Valid(p) {
			j.Preview = string(p)
		} else {
			j.Preview, j.Binary = base64.StdEncoding.EncodeToString(p), true
		}
		out = append(out, j)
	}
	return map[string]any{"dead_letters": out, "next_page_token": resp.GetNextPageToken()}, nil
}

// redrive moves dead letters back to ready: those named, or all.
func (c *Console) redrive(r request) (any, error) {
	var body struct {
		Queue      string   `json:"queue"`
		MessageIDs []string `json:"message_ids"`
		All        bool     `json:"all"`
	}
	if err := decode(r, &body); err != nil {
		return nil, err
	}
	if body.All == (len(body.MessageIDs) > 0) {
		return nil, badRequest{"set either all or message_ids"}
	}
	// All: a batch at a time (max_messages' default), until none is left
	// or the request's time is up.
	var moved int64
	var err error
	for range maxRounds {
		var resp *coordv1.RedriveResponse
		resp, err = c.queueClient(r.ns).Redrive(r.ctx, &coordv1.RedriveRequest{Queue: body.Queue, MessageIds: body.MessageIDs})
		moved += resp.GetMoved()
		if err != nil || !body.All || resp.GetMoved() == 0 {
			break
		}
	}
	c.o.Log.Info("console: redrive", "namespace", r.ns, "queue", body.Queue, "all", body.All, "asked", len(body.MessageIDs), "moved", moved, "err", err)
	if err != nil {
		return nil, partial(err, "redriven", moved)
	}
	return map[string]any{"moved": moved}, nil
}

// purge deletes a queue's dead letters; confirm must repeat the queue's
// name, so that no stray request purges.
func (c *Console) purge(r request) (any, error) {
	var body struct {
		Queue   string `json:"queue"`
		Confirm string `json:"confirm"`
	}
	if err := decode(r, &body); err != nil {
		return nil, err
	}
	if body.Confirm != body.Queue {
		return nil, badRequest{"confirm: type the queue's name to purge its dead letters"}
	}
	var purged, remaining int64
	var err error
	for range maxRounds {
		var resp *coordv1.PurgeDeadLettersResponse
		resp, err = c.queueClient(r.ns).PurgeDeadLetters(r.ctx, &coordv1.PurgeDeadLettersRequest{Queue: body.Queue})
		purged += resp.GetPurged()
		if err != nil {
			break
		}
		remaining = resp.GetRemaining()
		if remaining == 0 || resp.GetPurged() == 0 {
			break
		}
	}
	c.o.Log.Info("console: purge dead letters", "namespace", r.ns, "queue", body.Queue, "purged", purged, "remaining", remaining, "err", err)
	if err != nil {
		return nil, partial(err, "purged", purged)
	}
	return map[string]any{"purged": purged, "remaining": remaining}, nil
}

// maxRounds bounds the batches of one redrive or purge of everything.
const maxRounds = 100

// partial is err, a batch's failure after n messages were done (what: in
// the past tense) by earlier batches of the same request, with its code
// kept and the operator told what did happen; after an uncertain failure
// (UNAVAILABLE, DEADLINE_EXCEEDED) the failed batch may have happened too.
func partial(err error, what string, n int64) error {
	if redlockMode(err) {
		return err // nothing was done: the service is not served
	}
	st := status.Convert(err)
	msg := fmt.Sprintf("%d %s before this error: %s", n, what, st.Message())
	switch st.Code() {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		msg = fmt.Sprintf("%d %s before this error; the outcome of the last batch is unknown (reload to see the counts): %s", n, what, st.Message())
	}
	return status.Error(st.Code(), msg)
}

func holders(hs []*coordv1.Holder) []holderJSON {
	out := make([]holderJSON, 0, len(hs))
	for _, h := range hs {
		out = append(out, holderJSON{
			Owner: h.GetOwner(), Fence: uintString(h.GetFence()), TTLSeconds: h.GetTtl().AsDuration().Seconds(),
			Shared: h.GetShared(), SessionBound: h.GetSessionBound(),
		})
	}
	return out
}

func (c *Console) lock(r request) (any, error) {
	resp, err := coordv1.NewLockServiceClient(c.o.Local.Conn(r.ns)).GetLock(r.ctx, &coordv1.GetLockRequest{Name: r.URL.Query().Get("name")})
	if err != nil {
		return nil, err
	}
	return map[string]any{"held": resp.GetHeld(), "holders": holders(resp.GetHolders()), "waiters": resp.GetWaiters()}, nil
}

func (c *Console) semaphore(r request) (any, error) {
	resp, err := coordv1.NewSemaphoreServiceClient(c.o.Local.Conn(r.ns)).GetSemaphore(r.ctx, &coordv1.GetSemaphoreRequest{Name: r.URL.Query().Get("name")})
	if err != nil {
		return nil, err
	}
	return map[string]any{"limit": resp.GetLimit(), "holders": holders(resp.GetHolders()), "waiters": resp.GetWaiters()}, nil
}

func (c *Console) leader(r request) (any, error) {
	resp, err := coordv1.NewElectionServiceClient(c.o.Local.Conn(r.ns)).Leader(r.ctx, &coordv1.LeaderRequest{Name: r.URL.Query().Get("name")})
	if err != nil {
		return nil, err
	}
	out := map[string]any{"has_leader": resp.GetHasLeader()}
	if l := resp.GetLeader(); resp.GetHasLeader() {
		v, binary := l.GetValue(), false
		value := string(v)
		if !utf8.Valid(v) {
			value, binary = base64.StdEncoding.EncodeToString(v), true
		}
		out["value"], out["binary"], out["fence"], out["elect_time"] = value, binary, uintString(l.GetFence()), l.GetElectTime().AsTime()
	}
	return out, nil
}

// policies: the namespace's runtime policies and the config's, apart
// (RateLimitService.ListPolicies).
func (c *Console) policies(r request) (any, error) {
	resp, err := c.rateLimitClient(r.ns).ListPolicies(r.ctx, &coordv1.ListPoliciesRequest{})
	if err != nil {
		return nil, err
	}
	return map[string]any{"runtime": policiesJSON(resp.GetRuntime()), "config": policiesJSON(resp.GetConfig())}, nil
}

func (c *Console) rateLimitClient(ns string) coordv1.RateLimitServiceClient {
	return coordv1.NewRateLimitServiceClient(c.o.Local.Conn(ns))
}

func policiesJSON(ps []*coordv1.Policy) []policyJSON {
	out := make([]policyJSON, 0, len(ps))
	for _, p := range ps {
		j := policyJSON{Name: p.GetName(), Shadow: p.GetShadow(), OnStoreFailure: limiter.FailClosed.String(), LocalQuota: p.GetLocalQuota()}
		if f := limiter.OnStoreFailure(p.GetOnStoreFailure()); f != 0 {
			j.OnStoreFailure = f.String()
		}
		limits := p.GetLimits()
		if p.GetLimit() != nil {
			limits = []*coordv1.NamedLimit{{Limit: p.GetLimit()}}
		}
		for _, l := range limits {
			j.Limits = append(j.Limits, limitJSON{
				Name: l.GetName(), Algorithm: limiter.AlgorithmName(store.Algorithm(l.GetLimit().GetAlgorithm())), Limit: l.GetLimit().GetLimit(),
				Period: l.GetLimit().GetPeriod().AsDuration().String(), Burst: l.GetLimit().GetBurst(),
			})
		}
		out = append(out, j)
	}
	return out
}

// putPolicy stores a runtime policy of the namespace (PutPolicy): the
// body is a policy as the console lists it, one unnamed limit or several
// named ones. Logged with the namespace.
func (c *Console) putPolicy(r request) (any, error) {
	var body policyJSON
	if err := decode(r, &body); err != nil {
		return nil, err
	}
	p := &coordv1.Policy{Name: body.Name, Shadow: body.Shadow, LocalQuota: body.LocalQuota}
	if body.OnStoreFailure != "" {
		f, err := limiter.ParseOnStoreFailure(body.OnStoreFailure)
		if err != nil {
			return nil, badRequest{"on_store_failure: " + err.Error()}
		}
		p.OnStoreFailure = coordv1.OnStoreFailure(f)
	}
	for i, l := range body.Limits {
		alg, err := limiter.ParseAlgorithm(l.Algorithm)
		if err != nil {
			return nil, badRequest{fmt.Sprintf("limits[%d].algorithm: %v", i, err)}
		}
		period, err := time.ParseDuration(l.Period)
		if err != nil {
			return nil, badRequest{fmt.Sprintf("limits[%d].period: %q is not a duration such as 1s or 24h", i, l.Period)}
		}
		pl := &coordv1.Limit{Algorithm: coordv1.Algorithm(alg), Limit: l.Limit, Period: durationpb.New(period), Burst: l.Burst}
		if len(body.Limits) == 1 && l.Name == "" {
			p.Limit = pl
			break
		}
		p.Limits = append(p.Limits, &coordv1.NamedLimit{Name: l.Name, Limit: pl})
	}
	resp, err := c.rateLimitClient(r.ns).PutPolicy(r.ctx, &coordv1.PutPolicyRequest{Policy: p})
	c.o.Log.Info("console: put policy", "namespace", r.ns, "policy", body.Name, "err", err)
	if err != nil {
		return nil, err
	}
	return map[string]any{"created": resp.GetCreated()}, nil
}

// deletePolicy deletes a runtime policy of the namespace (DeletePolicy).
func (c *Console) deletePolicy(r request) (any, error) {
	var body struct {
		Name string `json:"name"`
	}
	if err := decode(r, &body); err != nil {
		return nil, err
	}
	resp, err := c.rateLimitClient(r.ns).DeletePolicy(r.ctx, &coordv1.DeletePolicyRequest{Name: body.Name})
	c.o.Log.Info("console: delete policy", "namespace", r.ns, "policy", body.Name, "err", err)
	if err != nil {
		return nil, err
	}
	return map[string]any{"deleted": resp.GetDeleted()}, nil
}

// allow: what Allow with peek answers now for a key under a policy; it
// consumes nothing.
func (c *Console) allow(r request) (any, error) {
	q := r.URL.Query()
	resp, err := c.rateLimitClient(r.ns).Allow(r.ctx, &coordv1.AllowRequest{
		Key: q.Get("key"), Policy: q.Get("policy"), Peek: true,
	})
	if err != nil {
		return nil, err
	}
	return map[string]any{
		"allowed": resp.GetAllowed(), "remaining": resp.GetRemaining(), "limit": resp.GetLimit(),
		"retry_after_seconds": resp.GetRetryAfter().AsDuration().Seconds(),
		"reset_after_seconds": resp.GetResetAfter().AsDuration().Seconds(),
		"degraded":            resp.GetDegraded(), "shadow_denied": resp.GetShadowDenied(), "denied_by": resp.GetDeniedBy(),
	}, nil
}

// health: this instance's streams (with auth on, the caller's namespace
// only) and the store's nodes (with auth on, without their addresses: a
// tenant does not learn the infrastructure).
func (c *Console) health(r request) (any, error) {
	streams := []streamsJSON{}
	for ns, n := range c.o.Local.Streams() {
		if c.authEnabled() && ns != r.ns {
			continue
		}
		streams = append(streams, streamsJSON{Namespace: ns, KeepAlive: n.KeepAlive, Waiting: n.Waiting})
	}
	slices.SortFunc(streams, func(a, b streamsJSON) int { return strings.Compare(a.Namespace, b.Namespace) })
	nodes := []nodeJSON{}
	if c.o.Nodes != nil {
		for i, n := range c.o.Nodes.NodeHealth(r.ctx) {
			j := nodeJSON{Index: i, Role: n.Role, Reachable: n.Reachable, LatencyMS: float64(n.Latency.Microseconds()) / 1000, Breaker: cmp.Or(n.Breaker, "none")}
			if !c.authEnabled() {
				j.Addr = n.Addr
			}
			nodes = append(nodes, j)
		}
	}
	return map[string]any{"namespace": r.ns, "streams": streams, "nodes": nodes}, nil
}

func uintString(u uint64) string { return strconv.FormatUint(u, 10) }
