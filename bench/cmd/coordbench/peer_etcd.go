package main

// The etcd peer of lock-release: a single-node etcd (go.etcd.io/etcd's
// embed package, the server etcd's own binary runs) in a child process
// (coordbench serve-etcd), with its data in a temporary directory removed
// at the end, on loopback ports it picks; fsync off (embed.Config
// UnsafeNoFsync, the target etcd), and on (etcd-fsync, etcd's default).
// One clientv3 client (one gRPC connection), one concurrency.Session (a
// lease of lockTTL) per caller made before the measurement, and per op a
// concurrency.Mutex on the name coordd's lock-release picks: TryLock (a
// name another caller holds is a miss, as coordd's Lock without wait
// answers not acquired), then Unlock. Two RPCs an op, as coordd's Lock and
// Release.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// etcdLockPrefix is the prefix of the mutexes' keys.
const etcdLockPrefix = "/coordbench/lock/"

// serveEtcd is the child mode coordbench serve-etcd DIR fsync|nofsync: a
// single-node etcd with its data in DIR, on free loopback ports; it prints
// its client address on stdout once etcd is ready, and stops it when stdin
// closes.
func serveEtcd(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) != 2 || (args[1] != "fsync" && args[1] != "nofsync") {
		return errors.New("usage: coordbench serve-etcd DIR fsync|nofsync")
	}
	clientAddr, err := freeLoopback()
	if err != nil {
		return err
	}
	peerAddr, err := freeLoopback()
	if err != nil {
		return err
	}
	cfg := embed.NewConfig()
	cfg.Name = "coordbench"
	cfg.Dir = args[0]
	cu, pu := url.URL{Scheme: "http", Host: clientAddr}, url.URL{Scheme: "http", Host: peerAddr}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.UnsafeNoFsync = args[1] == "nofsync"
	cfg.Logger, cfg.LogLevel, cfg.LogOutputs = "zap", "error", []string{"stderr"}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		return err
	case <-time.After(time.Minute):
		return errors.New("etcd not ready after a minute")
	}
	if _, err := fmt.Fprintln(stdout, clientAddr); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, stdin)
	return nil
}

// runEtcdPeers measures lock-release on etcd without fsync, then with, as
// --peers asks.
func (b *bench) runEtcdPeers(ctx context.Context) {
	const scenario = "lock-release"
	for _, p := range []struct {
		target string
		fsync  bool
	}{{tEtcd, false}, {tEtcdFsync, true}} {
		if !b.peerWanted(p.target) || ctx.Err() != nil {
			continue
		}
		if err := b.runEtcd(ctx, scenario, p.target, p.fsync); err != nil {
			b.peerFailed(scenario, p.target, err)
		}
	}
}

func (b *bench) runEtcd(ctx context.Context, scenario, target string, fsync bool) error {
	dir, err := os.MkdirTemp("", "coordbench-etcd-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	mode := "nofsync"
	if fsync {
		mode = "fsync"
	}
	srv, err := startChild("serve-etcd", dir, mode)
	if err != nil {
		return err
	}
	defer srv.stop()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.addr}, DialTimeout: 10 * time.Second, Logger: zap.NewNop(), Context: ctx})
	if err != nil {
		return err
	}
	defer func() { _ = cli.Close() }()
	// The sessions' keep-alives run until their context ends: after the
	// measurement, once the sessions are closed (their leases revoked).
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sessions := make([]*concurrency.Session, b.cfg.Concurrency)
	defer func() {
		for _, s := range sessions {
			if s != nil {
				_ = s.Close()
			}
		}
	}()
	for i := range sessions {
		if sessions[i], err = concurrency.NewSession(cli, concurrency.WithTTL(int(lockTTL.Seconds())), concurrency.WithContext(sctx)); err != nil {
			return fmt.Errorf("session %d: %w", i, err)
		}
	}
	b.measure(ctx, scenario, target, srv.pid, func(ctx context.Context, w *worker) error {
		m := concurrency.NewMutex(sessions[w.id], etcdLockPrefix+b.key(w))
		err := m.TryLock(ctx)
		if errors.Is(err, concurrency.ErrLocked) {
			w.misses++
			return nil
		}
		if err != nil {
			return err
		}
		return m.Unlock(ctx)
	})
	return nil
}
