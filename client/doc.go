// Package client is coordd's Go client: the generated stubs of
// github.com/coordd/coordd/api/gen/coord/v1 made into the primitives
// applications use, in the spirit of etcd's client/v3/concurrency.
//
//   - Session: a lease kept alive by a KeepAlive stream (a heartbeat every
//     TTL/3, a broken stream resumed with jittered backoff, a conservative
//     local deadline), with Lost (the holds coordd reports lost, by name and
//     reason), Done and Close (a half-close: coordd releases every hold at
//     once).
//   - Mutex (exclusive or shared), Semaphore and Election: holds bound to a
//     session, granted in arrival order across coordd instances, each with
//     its fence and a Lost channel.
//   - Limiter: rate-limit decisions (Allow) and waits (Wait).
//   - Idempotent: run a function once per key and replay its outcome.
//   - Worker: consume a queue at least once, with a claim extended while
//     the handler runs, Ack or Nack, concurrency and a graceful stop.
//
// Every constructor takes a grpc.ClientConnInterface: a *grpc.ClientConn
// dialled to coordd with the credentials it needs (an API key goes in
// per-RPC credentials or metadata, as with any gRPC service).
//
// A wait longer than coordd's limits.max_wait is made in rounds of at most
// that limit, learned from coordd's refusal of a longer one (WaitLimit).
//
// Uncertain outcomes are never reported as "no": a call whose outcome is
// unknown (UNAVAILABLE) is retried where a retry is safe, and otherwise
// returned as an error.
package client
