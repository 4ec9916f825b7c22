package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// What one op costs Redis, from the masters' own counters (INFO stats, cpu
// and commandstats) read around a measurement: commands executed (those a
// script calls included), scripts run, bytes in and out (replication
// excluded) and Redis CPU time. The counters are the servers': any other
// client of the same Redis in the same time is counted too.

// redisCounters are the masters' counters at one instant, summed.
type redisCounters struct {
	commands, netIn, netOut, replOut int64
	cpu                              time.Duration
	calls                            map[string]int64 // by command, from commandstats
	masters                          int
	cpuBy                            map[string]time.Duration // by master address
}

// RedisCost is what one op cost Redis, on average.
type RedisCost struct {
	Masters       int                `json:"masters"`
	CommandsPerOp float64            `json:"commands_per_op"`
	ScriptsPerOp  float64            `json:"scripts_per_op"` // EVALSHA + EVAL (+ FCALL)
	BytesInPerOp  float64            `json:"bytes_in_per_op"`
	BytesOutPerOp float64            `json:"bytes_out_per_op"` // to clients; replication excluded
	CPUPerOpUs    float64            `json:"redis_cpu_per_op_us"`
	Calls         map[string]float64 `json:"calls_per_op"` // per command, those ≥ 0.01 per op
	// Each master's share of the Redis CPU time, by address (a Cluster's).
	CPUShare map[string]float64 `json:"cpu_share_by_master,omitempty"`
}

// add adds one server's counters, read at addr.
func (sum *redisCounters) add(addr string, r redisCounters) {
	sum.commands += r.commands
	sum.netIn += r.netIn
	sum.netOut += r.netOut
	sum.replOut += r.replOut
	sum.cpu += r.cpu
	sum.cpuBy[addr] += r.cpu
	for k, v := range r.calls {
		sum.calls[k] += v
	}
	sum.masters++
}

// readInfoCounters reads one server's counters (one INFO).
func readInfoCounters(ctx context.Context, n redis.Cmdable) (redisCounters, error) {
	info, err := n.Info(ctx, "stats", "cpu", "commandstats").Result()
	if err != nil {
		return redisCounters{}, err
	}
	return parseRedisInfo(info), nil
}

// readRedisCounters reads every master's counters (one INFO each).
func readRedisCounters(ctx context.Context, c redis.UniversalClient) (redisCounters, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sum := redisCounters{calls: map[string]int64{}, cpuBy: map[string]time.Duration{}}
	var mu sync.Mutex
	read := func(ctx context.Context, addr string, n redis.Cmdable) error {
		r, err := readInfoCounters(ctx, n)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		sum.add(addr, r)
		return nil
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return read(ctx, n.Options().Addr, n) })
	} else {
		err = read(ctx, "", c)
	}
	return sum, err
}

// readNodesCounters reads the counters of independent servers (Redlock's
// masters: no Cluster knows them), one INFO each, by address.
func readNodesCounters(ctx context.Context, nodes []*redis.Client) (redisCounters, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	sum := redisCounters{calls: map[string]int64{}, cpuBy: map[string]time.Duration{}}
	for _, n := range nodes {
		r, err := readInfoCounters(ctx, n)
		if err != nil {
			return sum, fmt.Errorf("%s: %w", n.Options().Addr, err)
		}
		sum.add(n.Options().Addr, r)
	}
	return sum, nil
}

// parseRedisInfo reads the counters out of one server's INFO.
func parseRedisInfo(info string) redisCounters {
	r := redisCounters{calls: map[string]int64{}}
	var cpu float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok {
			continue
		}
		switch k {
		case "total_commands_processed":
			r.commands, _ = strconv.ParseInt(v, 10, 64)
		case "total_net_input_bytes":
			r.netIn, _ = strconv.ParseInt(v, 10, 64)
		case "total_net_output_bytes":
			r.netOut, _ = strconv.ParseInt(v, 10, 64)
		case "total_net_repl_output_bytes":
			r.replOut, _ = strconv.ParseInt(v, 10, 64)
		case "used_cpu_sys", "used_cpu_user":
			f, _ := strconv.ParseFloat(v, 64)
			cpu += f
		default:
			name, ok := strings.CutPrefix(k, "cmdstat_")
			if !ok {
				continue
			}
			calls, _, _ := strings.Cut(strings.TrimPrefix(v, "calls="), ",")
			if n, err := strconv.ParseInt(calls, 10, 64); err == nil {
				r.calls[name] = n
			}
		}
	}
	r.cpu = time.Duration(cpu * float64(time.Second))
	return r
}

// cost is what ops cost between before and after.
func (after redisCounters) cost(before redisCounters, ops int64) *RedisCost {
	if ops <= 0 || after.masters == 0 || after.masters != before.masters {
		return nil
	}
	n := float64(ops)
	c := &RedisCost{
		Masters:       after.masters,
		CommandsPerOp: float64(after.commands-before.commands) / n,
		BytesInPerOp:  float64(after.netIn-before.netIn) / n,
		BytesOutPerOp: float64((after.netOut-after.replOut)-(before.netOut-before.replOut)) / n,
		CPUPerOpUs:    us(after.cpu-before.cpu) / n,
		Calls:         map[string]float64{},
	}
	if total := after.cpu - before.cpu; total > 0 && len(after.cpuBy) > 1 {
		c.CPUShare = map[string]float64{}
		for a, v := range after.cpuBy {
			c.CPUShare[a] = float64(v-before.cpuBy[a]) / float64(total)
		}
	}
	for k, v := range after.calls {
		per := float64(v-before.calls[k]) / n
		if per >= 0.01 {
			c.Calls[k] = per
		}
		if k == "evalsha" || k == "eval" || k == "evalsha_ro" || k == "eval_ro" || k == "fcall" {
			c.ScriptsPerOp += per
		}
	}
	return c
}

// topCalls formats the commands an op ran, most first.
func (c *RedisCost) topCalls(max int) string {
	type kv struct {
		k string
		v float64
	}
	var all []kv
	for k, v := range c.Calls {
		if k == "info" {
			continue
		}
		all = append(all, kv{k, v})
	}
	slices.SortFunc(all, func(a, b kv) int {
		if a.v != b.v {
			if a.v > b.v {
				return -1
			}
			return 1
		}
		return strings.Compare(a.k, b.k)
	})
	var parts []string
	for i, e := range all {
		if i == max {
			parts = append(parts, "…")
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.2g", e.k, e.v))
	}
	return strings.Join(parts, ", ")
}
