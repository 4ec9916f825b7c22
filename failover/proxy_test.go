package failover

// A TCP proxy on loopback, for TestReplicationLoss: one between a Redis
// replica and its master (the replication link, which the test cuts), and
// one between coordd and whichever node is the master (switched to the
// promoted replica, as a Sentinel-aware client or a virtual IP would).

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// tcpProxy forwards every connection it accepts to its target. Cut makes it
// a black hole, as a partition would: bytes are read and dropped in both
// directions, connections stay open (so the master still counts its
// replica as connected, and WAIT waits for acknowledgements that never
// come), and new connections are accepted and dropped alike.
type tcpProxy struct {
	ln  net.Listener
	cut atomic.Bool
	// cutFrom, if set, limits Cut to the connections from that IP (a
	// replica whose bind-source-addr it is), so that a master announced
	// at the proxy's port still serves its clients.
	cutFrom string
	fromCut atomic.Int64 // open connections from cutFrom

	mu     sync.Mutex
	target string
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// startProxy listens on a free loopback port and forwards to target. It
// is closed, with every connection, when the test ends.
func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	return startProxyCutFrom(t, target, "")
}

// startProxyCutFrom is startProxy whose Cut affects only the connections
// from the IP cutFrom ("": all).
func startProxyCutFrom(t *testing.T, target, cutFrom string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{ln: ln, target: target, cutFrom: cutFrom, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *tcpProxy) Addr() string { return p.ln.Addr().String() }

// Port is the proxy's port, for REPLICAOF.
func (p *tcpProxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Cut stops all traffic through the proxy, without closing anything.
func (p *tcpProxy) Cut() { p.cut.Store(true) }

// Switch closes every connection and sends new ones to target.
func (p *tcpProxy) Switch(target string) {
	p.mu.Lock()
	p.target = target
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
}

func (p *tcpProxy) close() {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	_ = p.ln.Close()
	p.wg.Wait()
}

// track adds c to the connections Switch and close end; false if the
// proxy is closed.
func (p *tcpProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *tcpProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	_ = c.Close()
}

func (p *tcpProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if !p.track(in) {
			continue
		}
		p.wg.Add(1)
		go p.serve(in)
	}
}

func (p *tcpProxy) serve(in net.Conn) {
	defer p.wg.Done()
	defer p.untrack(in)
	cut := &p.cut
	if host, _, _ := net.SplitHostPort(in.RemoteAddr().String()); p.cutFrom != "" && host != p.cutFrom {
		cut = &atomic.Bool{} // never cut
	} else if p.cutFrom != "" {
		p.fromCut.Add(1)
		defer p.fromCut.Add(-1)
	}
	if cut.Load() {
		drain(in, nil, cut) // a black hole from the start
		return
	}
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	out, err := net.Dial("tcp", target)
	if err != nil {
		return // the target is down: the client sees its connection close
	}
	if !p.track(out) {
		return
	}
	defer p.untrack(out)
	done := make(chan struct{}, 2)
	go func() { drain(in, out, cut); done <- struct{}{} }()
	go func() { drain(out, in, cut); done <- struct{}{} }()
	<-done
	_ = in.Close()
	_ = out.Close()
	<-done
}

// drain copies from src to dst until src fails, dropping what it reads
// while cut is set (or always, with no dst).
func drain(src, dst net.Conn, cut *atomic.Bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && dst != nil && !cut.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				_ = src.Close()
			}
			return
		}
	}
}
