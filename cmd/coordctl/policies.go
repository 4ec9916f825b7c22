package main

// policy put|delete|list: a namespace's runtime rate-limit policies.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"

	coordv1 "github.com/coordd/coordd/api/gen/coord/v1"
)

var policySpec = &commandSpec{
	name: "policy",
	synopsis: "policy put NAME (--algorithm A --limit N --period D [--burst B] | --limits NAME=A:N/D[:B] ...) [flags] | " +
		"policy delete NAME | policy list",
	summary: "put, delete or list the namespace's runtime rate-limit policies",
	help: `put stores runtime policy NAME in the caller's namespace (replacing the one
of that name), in force on every coordd instance within a second: one
limit (--algorithm, --limit, --period, --burst) or several, each
--limits NAME=ALGORITHM:LIMIT/PERIOD[:BURST] (all must allow a call).
Flags of put: --shadow, --on-store-failure fail_closed|fail_open|local,
--local-quota N. A config policy's name cannot be put or deleted.
delete removes one; list prints the runtime policies, then the config's
(source=runtime, source=config).

  coordctl policy put per-user --algorithm token_bucket --limit 10 --period 1s --on-store-failure local
  coordctl policy put partner --limits second=token_bucket:10/1s --limits day=fixed_window:1000/24h`,
	setup: func(fs *pflag.FlagSet) func(*pflag.FlagSet) (command, error) {
		c := &policyCmd{p: &coordv1.Policy{}}
		var algorithm, onFailure string
		var limit, burst int64
		var period time.Duration
		var limits []string
		fs.StringVar(&algorithm, "algorithm", "", "put: the policy's one limit's algorithm")
		fs.Int64Var(&limit, "limit", 0, "put: units per period")
		fs.DurationVar(&period, "period", 0, "put: the period")
		fs.Int64Var(&burst, "burst", 0, "put: bucket capacity of token_bucket and leaky_bucket (0: the default)")
		fs.StringArrayVar(&limits, "limits", nil, "put: one of several limits, NAME=ALGORITHM:LIMIT/PERIOD[:BURST] (repeat)")
		fs.BoolVar(&c.p.Shadow, "shadow", false, "put: decide and count, but allow every call")
		fs.StringVar(&onFailure, "on-store-failure", "", "put: fail_closed (default), fail_open or local")
		fs.Int64Var(&c.p.LocalQuota, "local-quota", 0, "put: units each instance takes from the store at a time (0: none)")
		return func(fs *pflag.FlagSet) (command, error) {
			args := fs.Args()
			if len(args) == 0 {
				return nil, usagef("", "missing put, delete or list")
			}
			c.op, args = args[0], args[1:]
			switch c.op {
			case "put":
				if len(args) != 1 {
					return nil, usagef("", "policy put wants NAME")
				}
				c.p.Name = args[0]
				one := fs.Changed("algorithm") || fs.Changed("limit") || fs.Changed("period") || fs.Changed("burst")
				switch {
				case one && len(limits) > 0:
					return nil, usagef("", "--limits and a single limit (--algorithm, --limit, --period, --burst) exclude each other")
				case one:
					alg, ok := parseAlgorithm(algorithm)
					if !ok {
						return nil, usagef("", "--algorithm %q is not one of fixed_window, sliding_window, sliding_log, token_bucket, leaky_bucket", algorithm)
					}
					c.p.Limit = &coordv1.Limit{Algorithm: alg, Limit: limit, Period: durationpb.New(period), Burst: burst}
				case len(limits) > 0:
					for _, s := range limits {
						l, err := parseNamedLimit(s)
						if err != nil {
							return nil, err
						}
						c.p.Limits = append(c.p.Limits, l)
					}
				default:
					return nil, usagef("", "give a limit (--algorithm, --limit, --period) or --limits")
				}
				if onFailure != "" {
					v, ok := coordv1.OnStoreFailure_value["ON_STORE_FAILURE_"+strings.ToUpper(onFailure)]
					if !ok || v == 0 {
						return nil, usagef("", "--on-store-failure %q is not one of fail_closed, fail_open, local", onFailure)
					}
					c.p.OnStoreFailure = coordv1.OnStoreFailure(v)
				}
			case "delete":
				if len(args) != 1 {
					return nil, usagef("", "policy delete wants NAME")
				}
				c.p.Name = args[0]
			case "list":
				if len(args) != 0 {
					return nil, usagef("", "policy list takes no arguments")
				}
			default:
				return nil, usagef("", "unknown policy command %q: want put, delete or list", c.op)
			}
			return c, nil
		}
	},
}

// parseNamedLimit reads NAME=ALGORITHM:LIMIT/PERIOD[:BURST].
func parseNamedLimit(s string) (*coordv1.NamedLimit, error) {
	bad := usagef("", "--limits %q: want NAME=ALGORITHM:LIMIT/PERIOD[:BURST], e.g. day=fixed_window:1000/24h", s)
	name, rest, ok := strings.Cut(s, "=")
	if !ok {
		return nil, bad
	}
	parts := strings.Split(rest, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return nil, bad
	}
	alg, ok := parseAlgorithm(parts[0])
	n, per, ok2 := strings.Cut(parts[1], "/")
	limit, err1 := strconv.ParseInt(n, 10, 64)
	period, err2 := time.ParseDuration(per)
	if !ok || !ok2 || err1 != nil || err2 != nil {
		return nil, bad
	}
	l := &coordv1.Limit{Algorithm: alg, Limit: limit, Period: durationpb.New(period)}
	if len(parts) == 3 {
		if l.Burst, err1 = strconv.ParseInt(parts[2], 10, 64); err1 != nil {
			return nil, bad
		}
	}
	return &coordv1.NamedLimit{Name: name, Limit: l}, nil
}

type policyCmd struct {
	op string
	p  *coordv1.Policy
}

func (c *policyCmd) run(ctx context.Context, a *app, conn *grpc.ClientConn) error {
	ctx, cancel := a.call(ctx, 0)
	defer cancel()
	rl := coordv1.NewRateLimitServiceClient(conn)
	switch c.op {
	case "put":
		resp, err := rl.PutPolicy(ctx, &coordv1.PutPolicyRequest{Policy: c.p})
		if err != nil {
			return &rpcError{"policy put", err}
		}
		return a.emit(resp, fmt.Sprintf("created=%v", resp.GetCreated()))
	case "delete":
		resp, err := rl.DeletePolicy(ctx, &coordv1.DeletePolicyRequest{Name: c.p.GetName()})
		if err != nil {
			return &rpcError{"policy delete", err}
		}
		return a.emit(resp, fmt.Sprintf("deleted=%v", resp.GetDeleted()))
	}
	resp, err := rl.ListPolicies(ctx, &coordv1.ListPoliciesRequest{})
	if err != nil {
		return &rpcError{"policy list", err}
	}
	if a.opts.json {
		return a.emit(resp, "")
	}
	if len(resp.GetRuntime())+len(resp.GetConfig()) == 0 {
		fmt.Fprintln(a.stderr, "coordctl: no policies")
	}
	for _, l := range []struct {
		source string
		ps     []*coordv1.Policy
	}{{"runtime", resp.GetRuntime()}, {"config", resp.GetConfig()}} {
		for _, p := range l.ps {
			if _, err := fmt.Fprintln(a.stdout, fmtPolicy(l.source, p)); err != nil {
				return err
			}
		}
	}
	return nil
}

// fmtPolicy is a policy on one line.
func fmtPolicy(source string, p *coordv1.Policy) string {
	one := func(l *coordv1.Limit) string {
		s := fmt.Sprintf("%s:%d/%v", strings.ToLower(strings.TrimPrefix(l.GetAlgorithm().String(), "ALGORITHM_")), l.GetLimit(), l.GetPeriod().AsDuration())
		if l.GetBurst() > 0 {
			s += fmt.Sprintf(":%d", l.GetBurst())
		}
		return s
	}
	var limits []string
	if p.GetLimit() != nil {
		limits = append(limits, one(p.GetLimit()))
	}
	for _, l := range p.GetLimits() {
		limits = append(limits, l.GetName()+"="+one(l.GetLimit()))
	}
	onFailure := strings.ToLower(strings.TrimPrefix(p.GetOnStoreFailure().String(), "ON_STORE_FAILURE_"))
	if p.GetOnStoreFailure() == coordv1.OnStoreFailure_ON_STORE_FAILURE_UNSPECIFIED {
		onFailure = "fail_closed"
	}
	return fmt.Sprintf("source=%s name=%s limits=%s on_store_failure=%s shadow=%v local_quota=%d",
		source, strconv.Quote(p.GetName()), strings.Join(limits, ","), onFailure, p.GetShadow(), p.GetLocalQuota())
}
