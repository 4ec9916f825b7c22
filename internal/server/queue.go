package server

import (
	"context"
	"errors"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/metrics"
	"github.com/coordd/coordd/internal/queue"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/validate"
)

type queueServer struct {
	coordv1.UnimplementedQueueServiceServer
	svc     *queue.Service
	metrics *metrics.Metrics
	names   *queueNames // the queues served, for the console
	// activity counts each queue's messages by minute, for the console's
	// charts (nil: not counted).
	activity *Activity
}

// count records a queue operation of kind op, or, if the receipt was stale,
// a receipt_expired.
func (s *queueServer) count(op string, n int, err error) {
	switch {
	case errors.Is(err, store.ErrReceiptExpired):
		s.metrics.Queue("receipt_expired", 1)
	case err == nil:
		s.metrics.Queue(op, n)
	}
}

func (s *queueServer) Enqueue(ctx context.Context, req *coordv1.EnqueueRequest) (*coordv1.EnqueueResponse, error) {
	delay, err := nonNegative("delay", req.GetDelay())
	if err != nil {
		return nil, err
	}
	r := queue.EnqueueRequest{
		NS: namespace(ctx), Queue: req.GetQueue(), Payload: req.GetPayload(), Delay: delay,
		DedupID: req.GetDedupId(), MaxAttempts: int(req.GetMaxAttempts()),
		Priority: int(req.GetPriority()), Group: req.GetGroup(),
	}
	switch req.GetDedupMode() {
	case coordv1.DedupMode_DEDUP_MODE_UNSPECIFIED, coordv1.DedupMode_DEDUP_MODE_KEEP_FIRST:
	case coordv1.DedupMode_DEDUP_MODE_REPLACE:
		r.Replace = true
	default:
		return nil, validate.Errorf("dedup_mode", "is %d; it must be DEDUP_MODE_KEEP_FIRST or DEDUP_MODE_REPLACE", req.GetDedupMode())
	}
	if t := req.GetDeliverTime(); t != nil {
		if req.GetDelay() != nil {
			return nil, validate.Errorf("delay", "and deliver_time are both set; set one")
		}
		if err := t.CheckValid(); err != nil {
			return nil, validate.Errorf("deliver_time", "is not a valid Timestamp: %v", err)
		}
		r.DeliverTime = t.AsTime()
	}
	e, err := s.svc.Enqueue(ctx, r)
	if err != nil {
		return nil, err
	}
	s.names.saw(namespace(ctx), req.GetQueue())
	switch {
	case e.Duplicate:
		s.count("duplicate", 1, nil)
	case e.Replaced:
		s.count("replaced", 1, nil)
	default:
		s.count("enqueued", 1, nil)
		s.activity.add(namespace(ctx), req.GetQueue(), store.QueueCounts{Enqueued: 1})
	}
	return &coordv1.EnqueueResponse{MessageId: e.ID, DeliverTime: timestamp(e.DeliverTime), Duplicate: e.Duplicate, Replaced: e.Replaced}, nil
}

func (s *queueServer) Claim(ctx context.Context, req *coordv1.ClaimRequest) (*coordv1.ClaimResponse, error) {
	vis, err := positive("visibility_timeout", req.GetVisibilityTimeout())
	if err != nil {
		return nil, err
	}
	wait, err := nonNegative("wait", req.GetWait())
	if err != nil {
		return nil, err
	}
	msgs, err := s.svc.Claim(ctx, queue.ClaimRequest{
		NS: namespace(ctx), Queue: req.GetQueue(), Max: int(req.GetMaxMessages()), Visibility: vis, Wait: wait,
		HeldBack: s.metrics.ClaimHeldBack,
	})
	if err != nil {
		return nil, err
	}
	s.names.saw(namespace(ctx), req.GetQueue())
	s.count("claimed", len(msgs), nil)
	retried := 0
	for _, m := range msgs {
		if m.Attempt > 1 {
			retried++
		}
	}
	s.activity.add(namespace(ctx), req.GetQueue(), store.QueueCounts{Retried: int64(retried)})
	resp := &coordv1.ClaimResponse{Messages: make([]*coordv1.Message, len(msgs))}
	for i, m := range msgs {
		resp.Messages[i] = &coordv1.Message{
			MessageId: m.ID, Payload: m.Payload, Receipt: m.Receipt, Attempt: int32(m.Attempt),
			EnqueueTime: timestamp(m.EnqueueTime), DeliverTime: timestamp(m.DeliverTime),
			ExpireTime: timestamp(m.ExpireTime), MaxAttempts: int32(m.MaxAttempts),
			Priority: int32(m.Priority), Group: m.Group,
		}
	}
	return resp, nil
}

func (s *queueServer) Ack(ctx context.Context, req *coordv1.AckRequest) (*coordv1.AckResponse, error) {
	single := len(req.GetReceipts()) == 0
	receipts := req.GetReceipts()
	switch {
	case single:
		receipts = []string{req.GetReceipt()}
	case req.GetReceipt() != "":
		return nil, validate.Errorf("receipt", "and receipts are both set; set one")
	}
	acked, err := s.svc.Ack(ctx, namespace(ctx), req.GetQueue(), receipts, !single)
	if err != nil {
		return nil, err
	}
	resp := &coordv1.AckResponse{}
	for i, ok := range acked {
		if ok {
			resp.AckedCount++
		} else {
			resp.ExpiredReceipts = append(resp.ExpiredReceipts, receipts[i])
		}
	}
	s.count("acked", int(resp.AckedCount), nil)
	s.activity.add(namespace(ctx), req.GetQueue(), store.QueueCounts{Acked: int64(resp.AckedCount)})
	s.count("receipt_expired", len(resp.ExpiredReceipts), nil)
	if single && resp.AckedCount == 0 {
		return nil, store.ErrReceiptExpired
	}
	resp.Acked = len(resp.ExpiredReceipts) == 0
	return resp, nil
}

func (s *queueServer) Nack(ctx context.Context, req *coordv1.NackRequest) (*coordv1.NackResponse, error) {
	var delay *time.Duration
	if req.GetDelay() != nil {
		d, err := nonNegative("delay", req.GetDelay())
		if err != nil {
			return nil, err
		}
		delay = &d
	}
	n, err := s.svc.Nack(ctx, namespace(ctx), req.GetQueue(), req.GetReceipt(), delay)
	if n.Dead {
		s.count("dead_lettered", 1, err)
		if err == nil {
			s.activity.add(namespace(ctx), req.GetQueue(), store.QueueCounts{Dead: 1})
		}
	} else {
		s.count("nacked", 1, err)
	}
	if err != nil {
		return nil, err
	}
	return &coordv1.NackResponse{DeliverTime: timestamp(n.DeliverTime), DeadLettered: n.Dead}, nil
}

func (s *queueServer) Extend(ctx context.Context, req *coordv1.ExtendRequest) (*coordv1.ExtendResponse, error) {
	vis, err := required("visibility_timeout", req.GetVisibilityTimeout())
	if err != nil {
		return nil, err
	}
	t, err := s.svc.Extend(ctx, namespace(ctx), req.GetQueue(), req.GetReceipt(), vis)
	if err != nil {
		return nil, err
	}
	return &coordv1.ExtendResponse{ExpireTime: timestamp(t)}, nil
}

func (s *queueServer) Stats(ctx context.Context, req *coordv1.StatsRequest) (*coordv1.StatsResponse, error) {
	st, err := s.svc.Stats(ctx, namespace(ctx), req.GetQueue())
	if err != nil {
		return nil, err
	}
	s.names.saw(namespace(ctx), req.GetQueue())
	return &coordv1.StatsResponse{Ready: st.Ready, Delayed: st.Delayed, InFlight: st.InFlight, Dead: st.Dead, Paused: st.Paused}, nil
}

func (s *queueServer) PauseQueue(ctx context.Context, req *coordv1.PauseQueueRequest) (*coordv1.PauseQueueResponse, error) {
	c, err := s.svc.Pause(ctx, namespace(ctx), req.GetQueue(), true)
	if err != nil {
		return nil, err
	}
	s.names.saw(namespace(ctx), req.GetQueue())
	return &coordv1.PauseQueueResponse{Settings: queueSettings(c)}, nil
}

func (s *queueServer) ResumeQueue(ctx context.Context, req *coordv1.ResumeQueueRequest) (*coordv1.ResumeQueueResponse, error) {
	c, err := s.svc.Pause(ctx, namespace(ctx), req.GetQueue(), false)
	if err != nil {
		return nil, err
	}
	s.names.saw(namespace(ctx), req.GetQueue())
	return &coordv1.ResumeQueueResponse{Settings: queueSettings(c)}, nil
}

func (s *queueServer) ConfigureQueue(ctx context.Context, req *coordv1.ConfigureQueueRequest) (*coordv1.ConfigureQueueResponse, error) {
	c := store.QueueSettings{MaxInFlight: int(req.GetMaxInFlight())}
	if r := req.GetClaimRate(); r != nil {
		p, err := required("claim_rate.period", r.GetPeriod())
		if err != nil {
			return nil, err
		}
		c.RateLimit, c.RatePeriod = r.GetLimit(), p
		if c.RateLimit == 0 {
			return nil, validate.Errorf("claim_rate.limit", "is 0; set claim_rate with a limit, or leave it unset for no rate")
		}
	}
	got, err := s.svc.Configure(ctx, namespace(ctx), req.GetQueue(), c)
	if err != nil {
		return nil, err
	}
	s.names.saw(namespace(ctx), req.GetQueue())
	return &coordv1.ConfigureQueueResponse{Settings: queueSettings(got)}, nil
}

func (s *queueServer) GetQueueSettings(ctx context.Context, req *coordv1.GetQueueSettingsRequest) (*coordv1.GetQueueSettingsResponse, error) {
	c, err := s.svc.Settings(ctx, namespace(ctx), req.GetQueue())
	if err != nil {
		return nil, err
	}
	return &coordv1.GetQueueSettingsResponse{Settings: queueSettings(c)}, nil
}

// queueSettings converts a queue's settings to the API's.
func queueSettings(c store.QueueSettings) *coordv1.QueueSettings {
	out := &coordv1.QueueSettings{Paused: c.Paused, MaxInFlight: int32(c.MaxInFlight)}
	if c.RateLimit > 0 {
		out.ClaimRate = &coordv1.ClaimRate{Limit: c.RateLimit, Period: durationpb.New(c.RatePeriod)}
	}
	return out
}

func (s *queueServer) Redrive(ctx context.Context, req *coordv1.RedriveRequest) (*coordv1.RedriveResponse, error) {
	n, err := s.svc.Redrive(ctx, namespace(ctx), req.GetQueue(), int(req.GetMaxMessages()), req.GetMessageIds())
	if err != nil {
		return nil, err
	}
	s.names.saw(namespace(ctx), req.GetQueue())
	s.count("redriven", n, nil)
	return &coordv1.RedriveResponse{Moved: int64(n)}, nil
}

func (s *queueServer) ListDeadLetters(ctx context.Context, req *coordv1.ListDeadLettersRequest) (*coordv1.ListDeadLettersResponse, error) {
	page, err := s.svc.ListDead(ctx, namespace(ctx), req.GetQueue(), int(req.GetPageSize()), int(req.GetPreviewBytes()), req.GetPageToken())
	if err != nil {
		return nil, err
	}
	resp := &coordv1.ListDeadLettersResponse{NextPageToken: page.Next, DeadLetters: make([]*coordv1.DeadLetter, len(page.DeadLetters))}
	for i, d := range page.DeadLetters {
		resp.DeadLetters[i] = &coordv1.DeadLetter{
			MessageId: d.ID, PayloadPreview: d.Preview, PayloadSize: int64(d.Size), Attempts: int32(d.Attempts),
			EnqueueTime: timestamp(d.EnqueueTime), DeadTime: timestamp(d.DeadTime), Priority: int32(d.Priority), Group: d.Group,
		}
	}
	return resp, nil
}

func (s *queueServer) PurgeDeadLetters(ctx context.Context, req *coordv1.PurgeDeadLettersRequest) (*coordv1.PurgeDeadLettersResponse, error) {
	purged, remaining, err := s.svc.PurgeDead(ctx, namespace(ctx), req.GetQueue(), int(req.GetMaxMessages()))
	// Purged letters are gone even if a later partition failed.
	s.metrics.Queue("purged", int(purged))
	if err != nil {
		return nil, err
	}
	return &coordv1.PurgeDeadLettersResponse{Purged: purged, Remaining: remaining}, nil
}

func (s *queueServer) PutSchedule(ctx context.Context, req *coordv1.PutScheduleRequest) (*coordv1.PutScheduleResponse, error) {
	sc, err := s.svc.PutSchedule(ctx, queue.ScheduleRequest{
		NS: namespace(ctx), Queue: req.GetQueue(), Name: req.GetName(), Spec: req.GetSpec(), TimeZone: req.GetTimeZone(),
		Payload: req.GetPayload(), Group: req.GetGroup(), Priority: int(req.GetPriority()), MaxAttempts: int(req.GetMaxAttempts()),
	})
	if err != nil {
		return nil, err
	}
	s.names.saw(namespace(ctx), req.GetQueue())
	return &coordv1.PutScheduleResponse{Schedule: schedule(sc)}, nil
}

func (s *queueServer) DeleteSchedule(ctx context.Context, req *coordv1.DeleteScheduleRequest) (*coordv1.DeleteScheduleResponse, error) {
	ok, err := s.svc.DeleteSchedule(ctx, namespace(ctx), req.GetQueue(), req.GetName())
	if err != nil {
		return nil, err
	}
	return &coordv1.DeleteScheduleResponse{Deleted: ok}, nil
}

func (s *queueServer) ListSchedules(ctx context.Context, req *coordv1.ListSchedulesRequest) (*coordv1.ListSchedulesResponse, error) {
	l, err := s.svc.ListSchedules(ctx, namespace(ctx), req.GetQueue())
	if err != nil {
		return nil, err
	}
	resp := &coordv1.ListSchedulesResponse{Schedules: make([]*coordv1.Schedule, len(l))}
	for i, sc := range l {
		resp.Schedules[i] = schedule(sc)
	}
	return resp, nil
}

// schedule converts a schedule to the API's.
func schedule(sc queue.ScheduleInfo) *coordv1.Schedule {
	return &coordv1.Schedule{
		Queue: sc.Queue, Name: sc.Name, Spec: sc.Spec, TimeZone: sc.TimeZone, Group: sc.Group,
		Priority: int32(sc.Priority), MaxAttempts: int32(sc.MaxAttempts), PayloadSize: int64(sc.PayloadSize),
		LastTime: timestamp(sc.LastTime), NextTime: timestamp(sc.NextTime),
	}
}
