// Command fencedwrite increments a counter in PostgreSQL under a coordd lock,
// the way a coordd lock must be used: the lock's fence goes into the write,
// and PostgreSQL rejects a write whose fence is stale.
//
// A coordd lock is a lease, not a proof of exclusion. It ends when its TTL
// runs out whether or not we noticed: a GC pause, a swapped-out process or a
// slow network can outlast the TTL at any point, including between our last
// check and our write, and nothing can interrupt us to say so. Checking "do I
// still hold the lock?" before writing does not help, because the lease can
// end right after the check. What does help: every grant carries a fence,
// strictly greater than every fence issued before for that name, and the
// database itself refuses a write carrying a fence older than one it has
// already accepted. The check and the write are one statement, so no pause
// can fall between them.
//
//	go run ./fencedwrite --coordd 127.0.0.1:7070 \
//	  --dsn 'postgres://root@127.0.0.1:5432/test?sslmode=disable' --worker a
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"os/signal"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

// ErrNotAcquired means Lock answered acquired=false: someone else held the
// lock for all of our wait. That is a definite answer; trying again is safe.
var ErrNotAcquired = errors.New("lock not acquired")

// Worker makes locked increments of the counter row whose id is the lock's
// name. It is safe for concurrent use if Work is.
type Worker struct {
	Locks coordv1.LockServiceClient
	DB    *pgxpool.Pool
	Lock  string        // the lock's name, and the row's id
	TTL   time.Duration // the lease Lock asks for
	Wait  time.Duration // how long Lock may wait for the current holder
	Name  string        // the owner label contenders see
	Work  func()        // the work between read and write; nil for none
}

// Result is what one Increment did.
type Result struct {
	Fence    uint64 // the fence the lock was granted with
	Value    int64  // the value we computed (written unless Stale)
	Stale    bool   // the database rejected the write: nothing changed
	Released bool   // Release found the lock still ours
}

// Setup creates the table and the counter row if they are missing. Two
// CREATE TABLE IF NOT EXISTS at once can fail in PostgreSQL, so workers
// starting together take turns under a transaction-scoped advisory lock.
func Setup(ctx context.Context, db *pgxpool.Pool, id string) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('fenced_counter'))`)
		if err == nil {
			_, err = tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS fenced_counter (
				id text PRIMARY KEY, value bigint NOT NULL, last_fence bigint NOT NULL)`)
		}
		if err == nil {
			_, err = tx.Exec(ctx, `INSERT INTO fenced_counter VALUES ($1, 0, 0) ON CONFLICT (id) DO NOTHING`, id)
		}
		return err
	})
}

// Increment takes the lock, reads the counter, works, writes the counter
// plus one with the lock's fence, and releases the lock.
func (w *Worker) Increment(ctx context.Context) (res Result, err error) {
	g, err := w.Locks.Lock(ctx, &coordv1.LockRequest{
		Name: w.Lock, Ttl: durationpb.New(w.TTL), Wait: durationpb.New(w.Wait), Owner: w.Name,
	})
	if err != nil {
		// UNAVAILABLE here means the outcome is unknown: the lock may have
		// been granted to us with a token we never saw. Never assume we
		// hold it; the caller may retry Lock (a new attempt, which waits
		// out such a lease, at most its TTL) or give up. See main.
		return res, fmt.Errorf("lock %s: %w", w.Lock, err)
	}
	if !g.GetAcquired() {
		return res, fmt.Errorf("%w: held by %q for %v more", ErrNotAcquired, g.GetHolder(), g.GetTtl().AsDuration())
	}
	res.Fence = g.GetFence()
	// Release with our token whatever happens below, even on cancellation.
	// It is a compare-and-delete: if our lease ended and someone else holds
	// the lock, it answers released=false and leaves their lock alone. If it
	// fails (UNAVAILABLE), the lease still ends by itself at its TTL.
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		rel, rerr := w.Locks.Release(rctx, &coordv1.ReleaseRequest{Name: w.Lock, Token: g.GetToken()})
		res.Released = rel.GetReleased()
		if rerr != nil {
			log.Printf("%s: Release (the lease ends at its TTL anyway): %v", w.Name, rerr)
		}
	}()
	if res.Fence > math.MaxInt64 { // bigint is signed; coordd's fences are far below
		return res, fmt.Errorf("fence %d does not fit in a bigint", res.Fence)
	}
	fence := int64(res.Fence)

	// The read needs no fence: a stale read is caught by the write below.
	var value, seen int64
	if err := w.DB.QueryRow(ctx, `SELECT value, last_fence FROM fenced_counter WHERE id = $1`,
		w.Lock).Scan(&value, &seen); err != nil {
		return res, fmt.Errorf("read: %w", err)
	}
	if w.Work != nil {
		w.Work() // our lease may end anywhere in here, and we would not know
	}
	res.Value = value + 1

	// The fence check and the write are one atomic statement. A separate
	// check ("is my fence still the newest?") would be useless: the lease
	// can end, and a newer holder write, between the check and the write.
	//   last_fence < $2: nobody with a newer fence has written; an older
	//     holder arriving after us is rejected the same way.
	//   last_fence = $4: nobody wrote since our read. Without it, a holder
	//     whose lease ended before ours began (older fence) could write
	//     between our read and our write, and we would overwrite its update.
	tag, err := w.DB.Exec(ctx, `UPDATE fenced_counter SET value = $1, last_fence = $2
		WHERE id = $3 AND last_fence < $2 AND last_fence = $4`, res.Value, fence, w.Lock, seen)
	if err != nil {
		return res, fmt.Errorf("write: %w", err)
	}
	// 0 rows: our view is stale (our lease ended and a newer fence wrote, or
	// someone wrote since our read). Nothing was written. Do not repeat the
	// UPDATE: start over with a new Lock, a new fence and a fresh read.
	res.Stale = tag.RowsAffected() == 0
	return res, nil
}

func main() {
	addr := flag.String("coordd", "127.0.0.1:7070", "coordd gRPC address")
	dsn := flag.String("dsn", "postgres://root@127.0.0.1:5432/test?sslmode=disable", "PostgreSQL DSN")
	name := flag.String("lock", "fenced-counter", "lock name (and the counter row's id)")
	ttl := flag.Duration("ttl", 10*time.Second, "lease per increment")
	wait := flag.Duration("wait", 30*time.Second, "how long Lock waits for the holder")
	work := flag.Duration("work", 10*time.Millisecond, "simulated work per increment")
	worker := flag.String("worker", "worker-"+fmt.Sprint(os.Getpid()), "owner label")
	iterations := flag.Int("iterations", 10, "increments to make")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	conn, err := grpc.NewClient(*addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	db, err := pgxpool.New(ctx, *dsn)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := Setup(ctx, db, *name); err != nil {
		log.Fatalf("setup: %v", err)
	}
	// A lease suits work that surely ends well within its TTL (or Renew it,
	// with the token, well before it ends). For long or unpredictable work,
	// bind the lock to a session instead: open
	// SessionService.KeepAlive, Lock with its session_id and no ttl. The
	// heartbeats keep the lock as long as we are alive, a crash frees it
	// after the session's TTL, and the stream reports lost_locks and
	// expired=true. That news can itself arrive late (after a pause), so
	// the fenced write stays exactly as it is.
	w := &Worker{Locks: coordv1.NewLockServiceClient(conn), DB: db, Lock: *name,
		TTL: *ttl, Wait: *wait, Name: *worker, Work: func() { time.Sleep(*work) }}

	stale := 0 // rejected writes: reported, never retried as they were
	for done := 0; done < *iterations; {
		res, err := w.Increment(ctx)
		switch {
		case errors.Is(err, ErrNotAcquired):
			log.Printf("%s: %v; trying again", *worker, err)
		case status.Code(err) == codes.Unavailable:
			// Unknown outcome: we may hold the lock without its token. Back
			// off and Lock again; a lease we never saw ends at its TTL.
			log.Printf("%s: %v; outcome unknown, trying Lock again", *worker, err)
			time.Sleep(time.Second)
		case err != nil:
			log.Fatalf("%s: %v", *worker, err)
		case res.Stale:
			stale++
			done++
			log.Printf("%s: fence %d: STALE, nothing written; next round re-locks and re-reads", *worker, res.Fence)
		default:
			done++
			log.Printf("%s: fence %d: wrote %d", *worker, res.Fence, res.Value)
		}
	}
	log.Printf("%s: %d increments, %d stale", *worker, *iterations-stale, stale)
}
