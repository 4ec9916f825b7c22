// Package e2e runs coordd end to end across instances: its tests build the
// coordd binary, start two daemons on the shared Redis Cluster with one key
// prefix (see internal/redistest), and check through the generated gRPC
// clients that what one instance does is seen, and wakes waiters, on the
// other: sessions named and resumed across instances, lock hand-offs, queue
// long-polls and fences. TestNodeClient runs the Node.js client test of
// clients/node against a daemon on the memory store, to show that the API
// works from outside Go. The package has no code of its own.
package e2e
