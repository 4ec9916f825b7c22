// Command streamfloor measures what idle bidirectional streams cost a bare
// grpc-go server: the floor of coordd's sessions (one KeepAlive stream
// each). It starts itself as the server in a child process, opens N streams
// over connections of 500 streams each (as coordbench's sessions scenario
// does), sends and receives one message on each, waits 2 s, and prints the
// server's RSS growth per stream and its goroutines, heap and stacks.
//
//	go run ./cmd/streamfloor 10000
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
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/emptypb"
)

// echo is a service with one bidirectional streaming method that answers
// each message with itself.
var echo = grpc.ServiceDesc{
	ServiceName: "streamfloor.Echo",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName: "Echo", ServerStreams: true, ClientStreams: true,
		Handler: func(_ any, st grpc.ServerStream) error {
			for {
				m := new(emptypb.Empty)
				if err := st.RecvMsg(m); err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
				if err := st.SendMsg(m); err != nil {
					return err
				}
			}
		},
	}},
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "server" {
		if err := serve(); err != nil {
			fmt.Fprintln(os.Stderr, "streamfloor server:", err)
			os.Exit(1)
		}
		return
	}
	n := 10000
	if len(os.Args) > 1 {
		v, err := strconv.Atoi(os.Args[1])
		if err != nil || v < 1 {
			fmt.Fprintln(os.Stderr, "usage: streamfloor [streams]")
			os.Exit(2)
		}
		n = v
	}
	if err := run(n); err != nil {
		fmt.Fprintln(os.Stderr, "streamfloor:", err)
		os.Exit(1)
	}
}

// serve is the child: a bare server (default options but coordd's limit of
// concurrent streams) that prints its address, then, for each line on
// stdin, its goroutines, heap in use and stacks in use.
func serve() error {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	gs := grpc.NewServer(grpc.MaxConcurrentStreams(1000))
	gs.RegisterService(&echo, struct{}{})
	go func() { _ = gs.Serve(lis) }()
	fmt.Println(lis.Addr().String())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		fmt.Println(runtime.NumGoroutine(), m.HeapInuse, m.StackInuse)
	}
	gs.Stop()
	return nil
}

func run(n int) error {
	cmd := exec.Command(os.Args[0], "server")
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = in.Close(); _ = cmd.Wait() }()
	rd := bufio.NewReader(out)
	addr, err := rd.ReadString('\n')
	if err != nil {
		return err
	}
	stats := func() (g, heap, stack int64) {
		fmt.Fprintln(in, "stats")
		line, _ := rd.ReadString('\n')
		_, _ = fmt.Sscan(line, &g, &heap, &stack)
		return
	}
	time.Sleep(500 * time.Millisecond)
	rss0, err := rss(cmd.Process.Pid)
	if err != nil {
		return err
	}
	g0, h0, s0 := stats()

	nconn := (n + 499) / 500
	conns := make([]*grpc.ClientConn, nconn)
	for i := range conns {
		if conns[i], err = grpc.NewClient(strings.TrimSpace(addr), grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
			return err
		}
		defer conns[i].Close()
	}
	streams := make([]grpc.ClientStream, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			st, err := conns[i%nconn].NewStream(context.Background(), &echo.Streams[0], "/streamfloor.Echo/Echo")
			if err == nil {
				err = st.SendMsg(&emptypb.Empty{})
			}
			if err == nil {
				err = st.RecvMsg(new(emptypb.Empty))
			}
			if err != nil {
				errs <- err
				return
			}
			streams[i] = st
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	time.Sleep(2 * time.Second)
	rss1, err := rss(cmd.Process.Pid)
	if err != nil {
		return err
	}
	g1, h1, s1 := stats()
	f := float64(n)
	fmt.Printf("%d idle streams on %d connections: server RSS %.1f MB -> %.1f MB, %.0f B per stream; per stream: %.2f goroutines, %.0f B of stacks, %.0f B of heap in use\n",
		n, nconn, float64(rss0)/(1<<20), float64(rss1)/(1<<20), float64(rss1-rss0)/f,
		float64(g1-g0)/f, float64(s1-s0)/f, float64(h1-h0)/f)
	return nil
}

// rss is a process's VmRSS in bytes.
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseStatusRSS(b)
}

func parseStatusRSS(b []byte) (int64, error) {
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("VmRSS %q", v)
			}
			n, err := strconv.ParseInt(f[0], 10, 64)
			return n * 1024, err
		}
	}
	return 0, errors.New("no VmRSS")
}
