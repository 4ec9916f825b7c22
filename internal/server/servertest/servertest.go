// Package servertest runs coordd's gRPC server in a test's own process, on a
// store the test built, with every domain package at its default
// configuration (unless WithConfig changes it), and gives back a client
// connection to it over loopback.
// Tests outside internal/server (the Redis store's, the failover suite, the
// linearizability checks) use it to reach a store through the real API.
package servertest

import (
	"context"
	"log/slog"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/coordd/coordd/internal/clock"
	"github.com/coordd/coordd/internal/server"
	"github.com/coordd/coordd/internal/store"
)

// Option changes how Serve serves.
type Option func(*options)

type options struct {
	config   server.Config
	server   server.Options
	register func(*grpc.Server)
}

// WithConfig changes the services' configuration (server.DefaultConfig
// otherwise), e.g. to add rate-limit policies.
func WithConfig(change func(*server.Config)) Option {
	return func(o *options) { change(&o.config) }
}

// WithServerOptions changes the server's options (by default only a Log,
// which discards).
func WithServerOptions(change func(*server.Options)) Option {
	return func(o *options) { change(&o.server) }
}

// WithRegister has register add services to the server before it serves.
func WithRegister(register func(*grpc.Server)) Option {
	return func(o *options) { o.register = register }
}

// Serve serves coordd on st over loopback and returns a connection to it.
// clk is the services' clock: the one st runs on (a fake clock in a test
// that simulates time, so that the deny cache ages with the store's time).
// When the test ends the connection is closed, waiting calls are drained and
// the server stopped; st is the caller's to close.
func Serve(tb testing.TB, st store.Store, clk clock.Clock, opts ...Option) *grpc.ClientConn {
	tb.Helper()
	conn, stop, err := Start(st, clk, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(stop)
	return conn
}

// Start is Serve for a caller without a testing.TB (a TestMain, for
// examples): stop closes the connection, drains waiting calls and stops the
// server.
func Start(st store.Store, clk clock.Clock, opts ...Option) (conn *grpc.ClientConn, stop func(), err error) {
	o := options{config: server.DefaultConfig(), server: server.Options{Log: slog.New(slog.DiscardHandler)}}
	for _, opt := range opts {
		opt(&o)
	}
	drain, drainNow := context.WithCancel(context.Background())
	svc, err := server.NewServices(st, clk, o.config, drain)
	if err != nil {
		drainNow()
		return nil, nil, err
	}
	gs, _ := server.New(svc, o.server)
	if o.register != nil {
		o.register(gs)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		drainNow()
		svc.Wait()
		return nil, nil, err
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	stopServer := func() {
		drainNow()
		gs.Stop()
		<-served
		svc.Wait()
	}
	conn, err = grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		stopServer()
		return nil, nil, err
	}
	return conn, func() { _ = conn.Close(); stopServer() }, nil
}
