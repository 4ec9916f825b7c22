package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of utime and stime in /proc/PID/stat: USER_HZ, 100 on
// every Linux architecture Go supports (sysconf(_SC_CLK_TCK) needs cgo).
const userHZ = 100

// procSample is a process's CPU time and resident memory at one instant.
type procSample struct {
	cpu time.Duration // user + system, all threads
	rss int64         // bytes
}

// readProc reads pid's CPU time from /proc/PID/stat and its RSS from
// /proc/PID/status.
func readProc(pid int) (procSample, error) {
	var s procSample
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, err
	}
	if s.cpu, err = parseStatCPU(b); err != nil {
		return s, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	b, err = os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, err
	}
	if s.rss, err = parseStatusRSS(b); err != nil {
		return s, fmt.Errorf("/proc/%d/status: %w", pid, err)
	}
	return s, nil
}

// parseStatCPU returns utime+stime (fields 14 and 15) of a /proc/PID/stat
// line. The command name (field 2) may hold spaces and parentheses, so the
// fields are counted from the last ')'.
func parseStatCPU(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("no command name")
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, errors.New("too few fields")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("bad utime or stime")
	}
	return time.Duration(ut+st) * time.Second / userHZ, nil
}

// parseStatusRSS returns VmRSS of /proc/PID/status in bytes.
func parseStatusRSS(b []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("VmRSS %q", rest)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, err
		}
		return n * 1024, nil
	}
	return 0, errors.New("no VmRSS")
}

// selfCPU is this process's own CPU time (the load generator's).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAvg is the 1-minute load average, or -1.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// cpuModel is the CPU's model name from /proc/cpuinfo.
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
