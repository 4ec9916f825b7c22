package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
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

// emptyServer is a running bare server: in this process, or in a child.
type emptyServer struct {
	addr string
	pid  int // the child's, for its CPU time; 0 in process
	stop func()
}

func startEmptyServer(mode string) (*emptyServer, error) {
	if mode == "inprocess" {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		gs := newEmptyServer()
		go func() { _ = gs.Serve(lis) }()
		return &emptyServer{addr: lis.Addr().String(), stop: gs.Stop}, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "serve-empty")
	cmd.Stderr = os.Stderr
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
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stop()
		return nil, fmt.Errorf("empty server child: %w", err)
	}
	addr := strings.TrimSpace(line)
	if addr == "" {
		stop()
		return nil, errors.New("empty server child printed no address")
	}
	return &emptyServer{addr: addr, pid: cmd.Process.Pid, stop: stop}, nil
}
