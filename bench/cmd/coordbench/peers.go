package main

// The peers: services users would deploy instead of coordd, started by
// coordbench itself and measured in the same run as coordd, on the same
// machine, with the same load generator (the services targets,
// goals_services.go):
//
//   - etcd, etcd-fsync (lock-release): an embedded single-node etcd in a
//     child process, concurrency.Mutex (peer_etcd.go);
//   - gubernator (allow-token_bucket): one gubernator node in a child
//     process (peer_gubernator.go);
//   - envoy-rl (allow-fixed_window): envoyproxy/ratelimit's server on the
//     Redis of --redis (peer_envoy.go);
//   - redsync (redlock-lock-release): a library, not a service, but the
//     one Redlock users embed: its Mutex over the --redlock masters
//     (peer_redsync.go).
//
// A peer runs only when its scenario runs and --peers names it (all, the
// default, names every one). One that cannot start gets a row that says
// why (Result.Failed); the run goes on.

import (
	"fmt"
	"slices"
	"strings"
)

// tEtcdFsync is etcd with fsync on (tEtcd, goals_services.go, has it off).
const tEtcdFsync = "etcd-fsync"

// allPeers are the peers, as --peers names them.
var allPeers = []string{tEtcd, tEtcdFsync, tGubernator, tEnvoy, tRedsync}

// peerScenario is the scenario each peer is measured in.
var peerScenario = map[string]string{
	tEtcd: "lock-release", tEtcdFsync: "lock-release", tGubernator: "allow-token_bucket", tEnvoy: "allow-fixed_window",
	tRedsync: scRedlock,
}

// parsePeers parses --peers: all, none, or a comma list of peers.
func parsePeers(s string) ([]string, error) {
	var out []string
	for _, name := range strings.Split(s, ",") {
		switch name = strings.TrimSpace(name); {
		case name == "" || name == "none":
		case name == "all":
			for _, p := range allPeers {
				if !slices.Contains(out, p) {
					out = append(out, p)
				}
			}
		case slices.Contains(allPeers, name):
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		default:
			return nil, fmt.Errorf("--peers: unknown peer %q (known: %s, all, none)", name, strings.Join(allPeers, ", "))
		}
	}
	// In allPeers' order, whatever the order given.
	slices.SortFunc(out, func(a, b string) int { return slices.Index(allPeers, a) - slices.Index(allPeers, b) })
	return out, nil
}

// peerWanted says whether peer is to be measured now: --peers names it,
// and it has no row yet (with --coordd-bin the scenarios run once per
// binary; a peer does not depend on the binary and runs once).
func (b *bench) peerWanted(peer string) bool {
	return slices.Contains(b.cfg.Peers, peer) && !b.measured(peerScenario[peer], peer)
}

// peerFailed records that peer could not be measured in scenario: a row
// with no ops that says why.
func (b *bench) peerFailed(scenario, peer string, err error) {
	b.add(&Result{Scenario: scenario, Target: peer, Failed: err.Error()})
}

// peerSkipped records that peer was not run in scenario, and why (this
// run's flags do not allow it), once.
func (b *bench) peerSkipped(scenario, peer, why string) {
	line := scenario + "/" + peer + ": " + why
	if !slices.Contains(b.report.Skipped, line) {
		b.progress("%s", line)
		b.report.Skipped = append(b.report.Skipped, line)
	}
}
