package main

import (
	"slices"
	"testing"
)

func TestParsePeers(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"all", allPeers},
		{"none", nil},
		{"", nil},
		{"etcd-fsync, etcd", []string{tEtcd, tEtcdFsync}}, // allPeers' order
		{"etcd,all", allPeers},
		{"etcd-fsync,etcd-fsync", []string{tEtcdFsync}},
	} {
		got, err := parsePeers(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q: %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	for _, p := range allPeers {
		if !slices.Contains(allScenarios, peerScenario[p]) {
			t.Errorf("peer %s: scenario %q is not a scenario", p, peerScenario[p])
		}
	}
}
