// Package e2e runs coordd end to end across instances: its tests build the
// coordd binary, start two daemons on the shared Redis Cluster with one key
// prefix (see internal/redistest), and check through the generated gRPC
// clients that what one instance does is seen, and wakes waiters, on the
// other: sessions named and resumed across instances, lock hand-offs, queue
// long-polls and fences. The package has no code of its own.
package e2e
