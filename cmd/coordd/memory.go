package main

import (
	"bufio"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// memoryBudget is the memory coordd may use, and where that was read: the
// Go memory limit (GOMEMLIMIT) if one is set, else the cgroup's
// memory.max (a container's limit), else the machine's MemTotal; 0 if
// none can be read.
func memoryBudget() (int64, string) {
	if l := debug.SetMemoryLimit(-1); l > 0 && l < math.MaxInt64 {
		return l, "GOMEMLIMIT"
	}
	if b, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && n > 0 {
			return n, "cgroup memory.max"
		}
	}
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, "unknown"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			if kb, err := strconv.ParseInt(fields[1], 10, 64); err == nil {
				return kb << 10, "MemTotal"
			}
		}
	}
	return 0, "unknown"
}
