package redistest

import (
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/hashslot"
)

// ClusterProc is a private Redis Cluster that StartCluster started. Its
// methods fail the test on error and must be called from the test's
// goroutine.
type ClusterProc struct {
	t     testing.TB
	nodes []*Server
}

// StartCluster starts a private Redis Cluster of masters masters (at least
// 3, Redis' minimum) with replicasPerMaster replicas each, on free loopback
// ports in t.TempDir(); creates it with redis-cli --cluster create; waits
// until it is healthy (see Healthy) with every replica attached; and
// registers its end with t.Cleanup. When redis-server or redis-cli is not
// installed the test fails under CI and is skipped otherwise.
//
// Which nodes become masters and which replica follows which master is
// redis-cli's choice; ask Masters, Replicas and MasterFor.
func StartCluster(t testing.TB, masters, replicasPerMaster int) *ClusterProc {
	t.Helper()
	if masters < 3 || replicasPerMaster < 0 {
		t.Fatalf("redistest: StartCluster(%d, %d): Redis Cluster needs at least 3 masters", masters, replicasPerMaster)
	}
	bin, cli := binaries(t)
	c := &ClusterProc{t: t}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			n.cleanup()
		}
	})
	parent := t.TempDir()
	clusterConf := func(busPort int) []string {
		return []string{
			"cluster-enabled yes",
			"cluster-config-file nodes.conf",
			"cluster-node-timeout " + strconv.Itoa(int(NodeTimeout/time.Millisecond)),
			"cluster-port " + strconv.Itoa(busPort),
		}
	}
	for i := 0; i < masters*(1+replicasPerMaster); i++ {
		n, err := startServer(t, bin, parent, clusterConf, nil)
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		c.nodes = append(c.nodes, n)
	}

	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicasPerMaster), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	want := masters * replicasPerMaster
	if err := waitFor(30*time.Second, func() error {
		if err := c.Healthy(); err != nil {
			return err
		}
		if got := len(c.Replicas()); got != want {
			return fmt.Errorf("%d replicas attached, want %d", got, want)
		}
		return nil
	}); err != nil {
		t.Fatalf("redistest: the new cluster is not healthy after 30s: %v\n%s", err, c.dump())
	}
	return c
}

// Nodes returns every node, running or not, in a fixed order.
func (c *ClusterProc) Nodes() []*Server { return slices.Clone(c.nodes) }

// Addrs returns every node's address, running or not, in the order of
// Nodes.
func (c *ClusterProc) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Masters returns the running nodes that are masters by their own CLUSTER
// NODES ("myself,master"). While the cluster changes (a failover, a
// restarted node rejoining) the answer may be about to change; call
// WaitHealthy first for a settled one.
func (c *ClusterProc) Masters() []*Server {
	c.t.Helper()
	return c.byRole("master")
}

// Replicas returns the running nodes that are replicas by their own
// CLUSTER NODES ("myself,slave"), like Masters.
func (c *ClusterProc) Replicas() []*Server {
	c.t.Helper()
	return c.byRole("slave")
}

func (c *ClusterProc) byRole(role string) []*Server {
	var out []*Server
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		me, _, err := n.clusterNodes()
		if err == nil && me.flags[role] {
			out = append(out, n)
		}
	}
	return out
}

// MasterFor returns the running master that serves key's slot: the one
// whose own CLUSTER NODES lists the slot (the one with the higher config
// epoch while a restarted former master still claims it). It fails the
// test if no running master serves the slot, as between a master's death
// and its replica's promotion.
func (c *ClusterProc) MasterFor(key string) *Server {
	c.t.Helper()
	slot := Slot(key)
	var best *Server
	var bestEpoch int64 = -1
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		me, _, err := n.clusterNodes()
		if err != nil || !me.flags["master"] || !me.serves(slot) {
			continue
		}
		if me.epoch > bestEpoch {
			best, bestEpoch = n, me.epoch
		}
	}
	if best == nil {
		c.t.Fatalf("redistest: no running master serves slot %d (key %q)\n%s", slot, key, c.dump())
	}
	return best
}

// WaitHealthy waits until Healthy reports no problem, and fails the test
// if that takes longer than timeout. After a master's death it returns
// once its replica has taken over; after StartAll, once every master
// reports ok again.
func (c *ClusterProc) WaitHealthy(timeout time.Duration) {
	c.t.Helper()
	if err := waitFor(timeout, c.Healthy); err != nil {
		c.t.Fatalf("redistest: cluster not healthy after %v: %v\n%s", timeout, err, c.dump())
	}
}

// Healthy returns nil if the cluster is settled and serves every key:
// at least one node runs, and every running node
//   - reports cluster_state:ok with all 16384 slots assigned and ok,
//   - sees every slot served by a master that is running and not flagged
//     as failing, and agrees with the others about which node serves which
//     slot and about the role of every running node, and
//   - if it is a replica, has its replication link up to a running master.
//
// Killed or stopped nodes are not checked: a cluster with a dead replica
// is healthy, one with a dead master is not until a replica takes over.
// Healthy may be called from any goroutine.
func (c *ClusterProc) Healthy() error {
	byID := map[string]*Server{}
	views := map[*Server][]nodeLine{}
	var running []*Server
	for _, n := range c.nodes {
		if !n.Running() {
			continue
		}
		running = append(running, n)
		info, err := doText(n.Addr(), "CLUSTER", "INFO")
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %w", n.Addr(), err)
		}
		for _, f := range []struct{ name, want string }{
			{"cluster_state", "ok"},
			{"cluster_slots_assigned", "16384"},
			{"cluster_slots_ok", "16384"},
		} {
			if got := infoField(info, f.name); got != f.want {
				return fmt.Errorf("%s: %s:%s", n.Addr(), f.name, got)
			}
		}
		me, view, err := n.clusterNodes()
		if err != nil {
			return err
		}
		byID[me.id] = n
		views[n] = view
	}
	if len(running) == 0 {
		return errors.New("no node is running")
	}

	// Each running node's view: every slot served by a running master
	// that is not failing, the same one in every view, and the same role
	// for every running node.
	var owners [numSlots]string
	roles := map[string]string{}
	for i, n := range running {
		for _, l := range views[n] {
			if _, ours := byID[l.id]; !ours {
				continue
			}
			for _, bad := range []string{"fail", "fail?", "handshake", "noaddr"} {
				if l.flags[bad] {
					return fmt.Errorf("%s sees running node %s as %s", n.Addr(), l.addr, bad)
				}
			}
			role := l.role()
			if prev, ok := roles[l.id]; ok && prev != role {
				return fmt.Errorf("nodes disagree about the role of %s (%s, %s)", l.addr, prev, role)
			}
			roles[l.id] = role
		}
		var seen [numSlots]string
		for _, l := range views[n] {
			if !l.flags["master"] {
				continue
			}
			for _, r := range l.slots {
				for s := r[0]; s <= r[1]; s++ {
					seen[s] = l.id
				}
			}
		}
		for s, id := range seen {
			if id == "" {
				return fmt.Errorf("%s sees no master serving slot %d", n.Addr(), s)
			}
			if _, ok := byID[id]; !ok {
				return fmt.Errorf("%s sees slot %d served by a node that is not running (%q)", n.Addr(), s, id)
			}
			if i > 0 && owners[s] != id {
				return fmt.Errorf("nodes disagree about who serves slot %d", s)
			}
			owners[s] = id
		}
	}

	for _, n := range running {
		me := views[n][slices.IndexFunc(views[n], func(l nodeLine) bool { return l.flags["myself"] })]
		if !me.flags["slave"] {
			continue
		}
		if m, ok := byID[me.master]; !ok || !m.Running() {
			return fmt.Errorf("replica %s follows a node that is not running (%s)", n.Addr(), me.master)
		}
		info, err := doText(n.Addr(), "INFO", "replication")
		if err != nil {
			return fmt.Errorf("%s: INFO replication: %w", n.Addr(), err)
		}
		if got := infoField(info, "master_link_status"); got != "up" {
			return fmt.Errorf("replica %s: master_link_status:%s", n.Addr(), got)
		}
	}
	return nil
}

// StopAll stops every running node with SHUTDOWN NOSAVE, all at once so
// that no replica has the time to take over, and waits until they have
// exited.
func (c *ClusterProc) StopAll() {
	c.t.Helper()
	c.all((*Server).stop)
}

// StartAll starts every node that is not running, all at once, with its
// configuration and nodes.conf; it does not wait for the cluster to be
// healthy (see WaitHealthy).
func (c *ClusterProc) StartAll() {
	c.t.Helper()
	c.all(func(n *Server) error {
		if n.Running() {
			return nil
		}
		return n.start()
	})
}

func (c *ClusterProc) all(f func(*Server) error) {
	c.t.Helper()
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i, n := range c.nodes {
		wg.Go(func() { errs[i] = f(n) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.t.Fatalf("redistest: %v", err)
	}
}

// dump describes every node for a failure message: its role and state and
// its CLUSTER NODES.
func (c *ClusterProc) dump() string {
	var b strings.Builder
	for _, n := range c.nodes {
		if !n.Running() {
			fmt.Fprintf(&b, "%s: not running\n", n.Addr())
			continue
		}
		info, err := doText(n.Addr(), "CLUSTER", "INFO")
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", n.Addr(), err)
			continue
		}
		nodes, _ := doText(n.Addr(), "CLUSTER", "NODES")
		fmt.Fprintf(&b, "%s: cluster_state:%s\n%s", n.Addr(), infoField(info, "cluster_state"), nodes)
	}
	return b.String()
}

// waitFor calls check until it returns nil or timeout passes, and then
// returns check's last error.
func waitFor(timeout time.Duration, check func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

const numSlots = hashslot.Count

// nodeLine is one line of CLUSTER NODES:
// <id> <ip:port@cport[,hostname]> <flags> <master> <ping-sent> <pong-recv>
// <config-epoch> <link-state> <slot> <slot> ...
type nodeLine struct {
	id     string
	addr   string // ip:port
	flags  map[string]bool
	master string // the master's ID for a replica, else "-"
	epoch  int64
	slots  [][2]int // inclusive ranges; slots being imported or migrated are left out
}

func (l nodeLine) role() string {
	if l.flags["master"] {
		return "master"
	}
	return "slave"
}

func (l nodeLine) serves(slot int) bool {
	for _, r := range l.slots {
		if r[0] <= slot && slot <= r[1] {
			return true
		}
	}
	return false
}

// clusterNodes returns the server's CLUSTER NODES, and its own line.
func (s *Server) clusterNodes() (me nodeLine, all []nodeLine, err error) {
	text, err := doText(s.Addr(), "CLUSTER", "NODES")
	if err != nil {
		return me, nil, fmt.Errorf("%s: CLUSTER NODES: %w", s.Addr(), err)
	}
	all, err = parseClusterNodes(text)
	if err != nil {
		return me, nil, fmt.Errorf("%s: CLUSTER NODES: %w", s.Addr(), err)
	}
	i := slices.IndexFunc(all, func(l nodeLine) bool { return l.flags["myself"] })
	if i < 0 {
		return me, nil, fmt.Errorf("%s: CLUSTER NODES has no myself line", s.Addr())
	}
	return all[i], all, nil
}

func parseClusterNodes(text string) ([]nodeLine, error) {
	var out []nodeLine
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("short line %q", line)
		}
		l := nodeLine{id: f[0], master: f[3], flags: map[string]bool{}}
		l.addr, _, _ = strings.Cut(f[1], "@")
		for _, flag := range strings.Split(f[2], ",") {
			l.flags[flag] = true
		}
		var err error
		if l.epoch, err = strconv.ParseInt(f[6], 10, 64); err != nil {
			return nil, fmt.Errorf("config epoch in %q: %w", line, err)
		}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") {
				continue
			}
			lo, hi, isRange := strings.Cut(s, "-")
			if !isRange {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil || a < 0 || b >= numSlots || a > b {
				return nil, fmt.Errorf("slot %q in %q", s, line)
			}
			l.slots = append(l.slots, [2]int{a, b})
		}
		out = append(out, l)
	}
	return out, nil
}

// Slot returns the Cluster hash slot of key (hashslot.Of).
func Slot(key string) int { return hashslot.Of(key) }
