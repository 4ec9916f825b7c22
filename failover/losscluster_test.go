package failover

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
	"github.com/coordd/coordd/internal/redistest"
)

// replicaSource is the loopback address the cut replica connects from
// (bind-source-addr), so that the proxy in front of its master can tell
// its replication link from coordd's connections.
const replicaSource = "127.0.0.2"

// replicationLossCluster is TestReplicationLoss on a Redis Cluster (3
// masters, 1 replica each), with the Cluster's own failover: the master of
// the run's locks and queue announces a proxy's port
// (cluster-announce-port), so that its replica, and coordd, reach it
// through the proxy; the replica connects from 127.0.0.2
// (bind-source-addr), and the cut drops only its connections. The cluster
// bus is not proxied: once the master is killed, its replica is elected as
// usual (cluster-node-timeout 2 s: 4-5 s), having missed everything the
// master acknowledged during the cut. Idempotency keys are spread over the
// three masters: only those of the killed one can be lost.
func replicationLossCluster(t *testing.T, tc lossCase) {
	c := startCluster(t)
	// The run's objects all on one master: the first lock's.
	master := c.MasterFor(lockKey(lossLockName(0)))
	names := lossNames{}
	for i := 0; len(names.locks) < lossLocks; i++ {
		if n := lossLockName(i); c.MasterFor(lockKey(n)) == master {
			names.locks = append(names.locks, n)
		}
	}
	for i := 0; names.queue == ""; i++ {
		if n := lossQueue + "-" + strconv.Itoa(i); c.MasterFor(queueKey(n)) == master {
			names.queue = n
		}
	}
	var replica *redistest.Server
	_, mport, _ := net.SplitHostPort(master.Addr())
	for _, r := range c.Replicas() {
		if strings.Contains(infoReplication(t, r.Addr()), "master_port:"+mport+"\r") {
			replica = r
		}
	}
	if replica == nil {
		t.Fatalf("no replica of %s", master.Addr())
	}
	proxy := startProxyCutFrom(t, master.Addr(), replicaSource)
	// The bus connections come from the source address too: the replica
	// announces its IP, or the others would learn 127.0.0.2, where it does
	// not listen.
	rdo(t, replica.Addr(), "CONFIG", "SET", "cluster-announce-ip", "127.0.0.1")
	rdo(t, replica.Addr(), "CONFIG", "SET", "bind-source-addr", replicaSource)
	rdo(t, master.Addr(), "CONFIG", "SET", "cluster-announce-port", strconv.Itoa(proxy.Port()))
	// The replica follows its master's new address (gossip); make sure it
	// reconnects from its new source address.
	viaProxy := "master_port:" + strconv.Itoa(proxy.Port()) + "\r"
	killed := false
	for end := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ri := infoReplication(t, replica.Addr())
		from := proxy.fromCut.Load()
		if strings.Contains(ri, viaProxy) && strings.Contains(ri, "master_link_status:up") && from > 0 {
			break
		}
		if strings.Contains(ri, viaProxy) && from == 0 && !killed {
			rdo(t, replica.Addr(), "CLIENT", "KILL", "TYPE", "master") // reconnect from the new source address
			killed = true
		}
		if time.Now().After(end) {
			t.Fatalf("the replica is not replicating through the proxy after 20s (%d connections from %s):\n%s", from, replicaSource, ri)
		}
	}
	t.Logf("master %s announced at the proxy %s; its replica %s replicates through it from %s; objects: locks %v, queue %s",
		master.Addr(), proxy.Addr(), replica.Addr(), replicaSource, names.locks, names.queue)

	d := startDaemonMode(t, "coordd", "cluster", c.Addrs(),
		"COORDD_REDIS_WAIT_REPLICAS="+strconv.Itoa(tc.waitReplicas))
	conn := dial(t, d.GRPCAddr)
	cc := newClients(conn)
	idem := coordv1.NewIdempotencyServiceClient(conn)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lk := startLossLocks(ctx, cc, names.locks)
	q := startLossQueue(ctx, cc, names.queue)
	id := startLossIdem(ctx, idem)

	tl := cutThenKill(proxy.Cut, master.Kill, tc.cutLength())
	// What the replica has, read before the Cluster promotes it.
	fences, dedup := replicaState(t, replica.Addr(), true, names)
	c.WaitHealthy(healthyTimeout)
	tl.promoted = time.Now()
	if now := c.MasterFor(lockKey(names.locks[0])); now != replica {
		t.Fatalf("%s serves the objects after the failover, not the replica %s", now.Addr(), replica.Addr())
	}
	// The old master comes back (announcing its own port: CONFIG SET is
	// not saved) and rejoins as the new master's replica.
	master.Start()
	c.WaitHealthy(healthyTimeout)
	tl.rejoined = time.Now()
	t.Logf("link cut; master killed %v later; replica promoted %v after the kill; old master rejoined %v after the promotion (%s)",
		ms(tl.killed.Sub(tl.cut)), ms(tl.promoted.Sub(tl.killed)), ms(tl.rejoined.Sub(tl.promoted)), replicationInfo(replica.Addr()))

	time.Sleep(lossAfter)
	cancel()
	lossResults(t, tc, tl, cc, idem, lk, q, id, fences, dedup)
}
