package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

// The bare floor: a gRPC server with nothing but one unary method that
// returns its (empty) request, with grpc-go's default options and no
// interceptors. What coordd adds over it is coordd's.

const emptyMethod = "/coordbench.Empty/Call"

var emptyDesc = grpc.ServiceDesc{
	ServiceName: "coordbench.Empty",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Call",
		Handler: func(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			return in, nil
		},
	}},
}

// newEmptyServer returns a bare server with the empty method.
func newEmptyServer() *grpc.Server {
	gs := grpc.NewServer()
	gs.RegisterService(&emptyDesc, struct{}{})
	return gs
}

// serveEmpty is the child mode (coordbench serve-empty): it serves the
// empty method on a loopback port, prints the address on stdout, and exits
// when stdin closes (when the parent ends).
func serveEmpty(stdin io.Reader, stdout io.Writer) error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	gs := newEmptyServer()
	go func() { _ = gs.Serve(lis) }()
	if _, err := fmt.Fprintln(stdout, lis.Addr().String()); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, stdin)
	gs.Stop()
	return nil
}

// childServer is a running server of coordbench's own: the bare server
// (in this process, or in a child), or a peer's in a child.
type childServer struct {
	addr string
	pid  int // the child's, for its CPU time; 0 in process
	stop func()
}

func startEmptyServer(mode string) (*childServer, error) {
	if mode == "inprocess" {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		gs := newEmptyServer()
		go func() { _ = gs.Serve(lis) }()
		return &childServer{addr: lis.Addr().String(), stop: gs.Stop}, nil
	}
	return startChild("serve-empty")
}

// startChild runs this executable with args (a child mode: serve-empty,
// serve-etcd, serve-gubernator), which prints the address it serves on
// stdout and exits when its stdin closes; stop closes it and waits (killing
// the child after 10 s). The child's stderr is this process's.
func startChild(args ...string) (*childServer, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, args...)
	errTail := &tailWriter{max: 4096}
	cmd.Stderr = io.MultiWriter(os.Stderr, errTail)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	stop := func() {
		_ = stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		return nil, fmt.Errorf("coordbench %s: %w (no address printed); its stderr ends: %s", args[0], err, errTail)
	}
	addr := strings.TrimSpace(line)
	if addr == "" {
		stop()
		return nil, fmt.Errorf("coordbench %s printed no address", args[0])
	}
	return &childServer{addr: addr, pid: cmd.Process.Pid, stop: stop}, nil
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailWriter) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}
