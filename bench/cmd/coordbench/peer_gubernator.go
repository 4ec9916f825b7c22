package main

// The gubernator peer of allow-token_bucket: one gubernator node
// (github.com/gubernator-io/gubernator/v2's Daemon, what its own binary
// runs) in a child process (coordbench serve-gubernator) on free loopback
// ports, with the Daemon's defaults (cache of 50,000 limits, a worker per
// CPU) and no peer discovery: its only peer is itself, the owner of every
// key. It keeps its limits in memory, as coordd's memory store does. Per op
// one V1/GetRateLimits call with one TOKEN_BUCKET request of the
// scenario's limit (limit, burst and period of limitSpecs["token_bucket"])
// on the key coordd's scenario picks, through the gRPC client options
// coordd's calls use (--conns connections, no API key).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gubernator-io/gubernator/v2"
	"github.com/sirupsen/logrus"
)

// serveGubernator is the child mode coordbench serve-gubernator: one
// gubernator node on free loopback ports; it prints its gRPC address on
// stdout once it serves, and stops when stdin closes.
func serveGubernator(stdin io.Reader, stdout io.Writer) error {
	grpcAddr, err := freeLoopback()
	if err != nil {
		return err
	}
	httpAddr, err := freeLoopback()
	if err != nil {
		return err
	}
	log := logrus.New()
	log.SetOutput(os.Stderr)
	log.SetLevel(logrus.ErrorLevel)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := gubernator.SpawnDaemon(ctx, gubernator.DaemonConfig{
		GRPCListenAddress: grpcAddr,
		HTTPListenAddress: httpAddr,
		AdvertiseAddress:  grpcAddr,
		InstanceID:        "coordbench",
		PeerDiscoveryType: "none",
		Logger:            logrus.NewEntry(log),
	})
	if err != nil {
		return err
	}
	defer d.Close()
	// Its own address as its only peer: it owns every key.
	d.SetPeers([]gubernator.PeerInfo{{GRPCAddress: grpcAddr, HTTPAddress: httpAddr}})
	if _, err := fmt.Fprintln(stdout, grpcAddr); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, stdin)
	return nil
}

// runGubernator measures allow-token_bucket on gubernator.
func (b *bench) runGubernator(ctx context.Context, scenario string, spec limitSpec) error {
	srv, err := startChild("serve-gubernator")
	if err != nil {
		return err
	}
	defer srv.stop()
	conns, err := b.dial(srv.addr, b.cfg.Conns, false)
	if err != nil {
		return err
	}
	defer closeAll(conns)
	cls := make([]gubernator.V1Client, len(conns))
	for i, c := range conns {
		cls[i] = gubernator.NewV1Client(c)
	}
	req := func(key string) *gubernator.GetRateLimitsReq {
		return &gubernator.GetRateLimitsReq{Requests: []*gubernator.RateLimitReq{{
			Name: "coordbench", UniqueKey: key, Hits: 1, Algorithm: gubernator.Algorithm_TOKEN_BUCKET,
			Limit: spec.limit, Burst: spec.capacity(), Duration: spec.periodMicros / 1000, // milliseconds
		}}}
	}
	allow := func(ctx context.Context, c gubernator.V1Client, key string) (bool, error) {
		r, err := c.GetRateLimits(ctx, req(key))
		if err != nil {
			return false, err
		}
		if len(r.GetResponses()) != 1 {
			return false, fmt.Errorf("GetRateLimits: %d responses to 1 request", len(r.GetResponses()))
		}
		rr := r.GetResponses()[0]
		if rr.GetError() != "" {
			return false, errors.New("GetRateLimits: " + rr.GetError())
		}
		return rr.GetStatus() == gubernator.Status_UNDER_LIMIT, nil
	}
	// One call first: the node answers, and with the limit asked.
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	r, err := cls[0].GetRateLimits(cctx, req("cb:check:"+b.runID))
	cancel()
	if err != nil {
		return err
	}
	if len(r.GetResponses()) != 1 || r.GetResponses()[0].GetLimit() != spec.limit || r.GetResponses()[0].GetError() != "" {
		return fmt.Errorf("first GetRateLimits answered %v", r)
	}
	b.measure(ctx, scenario, tGubernator, srv.pid, func(ctx context.Context, w *worker) error {
		ok, err := allow(ctx, cls[w.id%len(cls)], b.key(w))
		if err == nil && !ok {
			w.misses++
		}
		return err
	})
	return nil
}
