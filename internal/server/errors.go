package server

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"strconv"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/limiter"
	"github.com/coordd/coordd/internal/metrics"
	"github.com/coordd/coordd/internal/session"
	"github.com/coordd/coordd/internal/store"
	"github.com/coordd/coordd/internal/validate"
)

// ErrorDomain is the domain of every google.rpc.ErrorInfo coordd sends.
const ErrorDomain = "coordd"

// errShuttingDown ends a stream when the daemon drains.
var errShuttingDown = session.ErrDraining

// errorTable is the one place where domain errors become gRPC statuses.
var errorTable = []struct {
	err    error
	code   codes.Code
	reason string
}{
	{store.ErrNotHeld, codes.FailedPrecondition, "LOCK_NOT_HELD"},
	{store.ErrSessionBound, codes.FailedPrecondition, "LOCK_SESSION_BOUND"},
	{store.ErrSessionNotFound, codes.FailedPrecondition, "SESSION_NOT_FOUND"},
	{store.ErrFingerprintMismatch, codes.FailedPrecondition, "FINGERPRINT_MISMATCH"},
	{store.ErrNotOwner, codes.FailedPrecondition, "NOT_OWNER"},
	{store.ErrReceiptExpired, codes.FailedPrecondition, "RECEIPT_EXPIRED"},
	{store.ErrTooManySessions, codes.ResourceExhausted, "TOO_MANY_SESSIONS"},
	{store.ErrTooManyHolds, codes.ResourceExhausted, "TOO_MANY_LOCKS"},
	{store.ErrTooManyWaiters, codes.ResourceExhausted, "TOO_MANY_WAITERS"},
	{store.ErrLimitMismatch, codes.FailedPrecondition, "LIMIT_MISMATCH"},
	{store.ErrNotLeader, codes.FailedPrecondition, "NOT_LEADER"},
	{store.ErrQueueFull, codes.ResourceExhausted, "QUEUE_FULL"},
	{store.ErrMemoryHigh, codes.ResourceExhausted, "STORE_MEMORY_HIGH"},
	{store.ErrTooManySchedules, codes.ResourceExhausted, "TOO_MANY_SCHEDULES"},
	{store.ErrTooManyPolicies, codes.ResourceExhausted, "TOO_MANY_POLICIES"},
	{limiter.ErrFromConfig, codes.FailedPrecondition, "POLICY_FROM_CONFIG"},
	{store.ErrSuperseded, codes.FailedPrecondition, "SESSION_SUPERSEDED"},
	{store.ErrRedlockMode, codes.FailedPrecondition, "REDLOCK_MODE"},
	{store.ErrUnavailable, codes.Unavailable, "STORE_UNAVAILABLE"},
	{errShuttingDown, codes.Unavailable, "SHUTTING_DOWN"},
	// Last: a domain error above may wrap a context error too.
	{context.Canceled, codes.Canceled, reasonCancelled},
	{context.DeadlineExceeded, codes.DeadlineExceeded, reasonDeadlineExceeded},
}

// Reasons of errors not in errorTable.
const (
	reasonInvalidArgument  = "INVALID_ARGUMENT"
	reasonInternal         = "INTERNAL"
	reasonCancelled        = "CANCELLED"
	reasonDeadlineExceeded = "DEADLINE_EXCEEDED"
)

type errorMapper struct {
	log     *slog.Logger
	metrics *metrics.Metrics
	// hideStore (auth on): a store failure's text, which can name the
	// store's nodes (addresses, a dial error), stays in the call's log
	// line; the client, a tenant, is told only that the store failed.
	hideStore bool
}

// storeFailed is what a client is told of a store failure when the
// failure's own text is for the operator only.
const storeFailed = "the store is unavailable; the operation may or may not have happened"

// toStatus turns a handler's error into a status error with an ErrorInfo.
// Errors that already are statuses pass through; context errors become
// Canceled or DeadlineExceeded (errorTable); an error nobody expected
// becomes Internal with a generic message (and is logged), never Unknown.
//
// gRPC's own statuses of a failed receive or send (a message over
// limits.max_message_bytes, a stream cancelled under it) never come here
// with a chance to be changed: grpc-go writes them to the client itself,
// inside ServerStream.RecvMsg and SendMsg, before the handler sees the
// error. They carry no ErrorInfo.
func (e errorMapper) toStatus(ctx context.Context, method string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var fe *validate.FieldError
	if errors.As(err, &fe) {
		meta := map[string]string{"field": fe.Field}
		if fe.Limit > 0 {
			// As a google.protobuf.Duration's JSON: seconds with an s.
			meta["limit"] = strconv.FormatFloat(fe.Limit.Seconds(), 'f', -1, 64) + "s"
		}
		return withDetails(codes.InvalidArgument, fe.Error(), reasonInvalidArgument, meta,
			&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: fe.Field, Description: fe.Reason}}})
	}
	for _, row := range errorTable {
		if errors.Is(err, row.err) {
			msg := err.Error()
			if e.hideStore && row.err == store.ErrUnavailable {
				if ci := infoOf(ctx); ci != nil {
					ci.storeErr = msg
				}
				msg = storeFailed
			}
			return withDetails(row.code, msg, row.reason, nil)
		}
	}
	e.log.ErrorContext(ctx, "unexpected error", "method", method, "err", err)
	return withDetails(codes.Internal, "internal error", reasonInternal, nil)
}

// keepAliveStatus is the status of a KeepAlive stream ended by err, as
// the server's stream interceptors answer it: a revoked credential's
// (authStream), or toStatus's.
func (e errorMapper) keepAliveStatus(ctx context.Context, err error) error {
	if r := revoked(ctx); r != nil {
		return r
	}
	if errors.Is(err, session.ErrPanicked) {
		// The panic itself is logged and counted when the handler raises it.
		return withDetails(codes.Internal, "internal error", reasonInternal, nil)
	}
	return e.toStatus(ctx, coordv1.SessionService_KeepAlive_FullMethodName, err)
}

// withDetails builds a status with an ErrorInfo and any further details.
func withDetails(code codes.Code, msg, reason string, meta map[string]string, more ...protoadapt.MessageV1) error {
	st := status.New(code, msg)
	details := append([]protoadapt.MessageV1{&errdetails.ErrorInfo{Reason: reason, Domain: ErrorDomain, Metadata: meta}}, more...)
	if withInfo, err := st.WithDetails(details...); err == nil {
		st = withInfo
	}
	return st.Err()
}

func (e errorMapper) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	if err != nil {
		return nil, e.toStatus(ctx, info.FullMethod, err)
	}
	return resp, nil
}

func (e errorMapper) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return e.toStatus(ss.Context(), info.FullMethod, h(srv, ss))
}

// recovered turns a handler's panic into Internal, logging it but telling the
// client nothing of it.
func (e errorMapper) recovered(ctx context.Context, p any) error {
	e.metrics.Panic()
	e.log.ErrorContext(ctx, "handler panicked", "panic", p, "stack", string(debug.Stack()))
	return withDetails(codes.Internal, "internal error", reasonInternal, nil)
}
