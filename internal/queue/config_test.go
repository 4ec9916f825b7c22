package queue_test

import (
	"strings"
	"testing"
	"time"

	"github.com/coordd/coordd/internal/queue"
)

// TestConfigValidate: the defaults pass, and every bad value is an error
// that names its configuration key.
func TestConfigValidate(t *testing.T) {
	if err := queue.DefaultConfig().Validate(); err != nil {
		t.Fatalf("DefaultConfig().Validate() = %v", err)
	}
	tests := []struct {
		name string
		set  func(*queue.Config)
		want string
	}{
		{"zero visibility", func(c *queue.Config) { c.DefaultVisibility = 0 }, "queue.default_visibility_timeout: must be positive, got 0s"},
		{"visibility default over max", func(c *queue.Config) { c.DefaultVisibility, c.MaxVisibility = 2*time.Hour, time.Hour },
			"queue.default_visibility_timeout: (2h0m0s) must not exceed queue.max_visibility_timeout (1h0m0s)"},
		{"zero claim messages", func(c *queue.Config) { c.MaxClaimMessages = 0 }, "queue.max_claim_messages: must be at least 1, got 0"},
		{"zero max attempts", func(c *queue.Config) { c.DefaultMaxAttempts = 0 }, "queue.default_max_attempts: must be at least 1, got 0"},
		{"max attempts over the limit", func(c *queue.Config) { c.DefaultMaxAttempts, c.MaxAttemptsLimit = 10, 5 },
			"queue.default_max_attempts: (10) must not exceed queue.max_attempts_limit (5)"},
		{"zero payload bytes", func(c *queue.Config) { c.MaxPayloadBytes = 0 }, "queue.max_payload_bytes: must be at least 1, got 0"},
		{"negative max delay", func(c *queue.Config) { c.MaxDelay = -5 * time.Minute }, "queue.max_delay: must be positive, got -5m0s"},
		{"zero dedup window", func(c *queue.Config) { c.DedupWindow = 0 }, "queue.dedup_window: must be positive, got 0s"},
		{"zero dead letter ttl", func(c *queue.Config) { c.DeadLetterTTL = 0 }, "queue.dead_letter_ttl: must be positive, got 0s"},
		{"zero backoff base", func(c *queue.Config) { c.BackoffBase = 0 }, "queue.nack_backoff_base: must be positive, got 0s"},
		{"backoff base over max", func(c *queue.Config) { c.BackoffBase, c.BackoffMax = time.Hour, time.Minute },
			"queue.nack_backoff_base: (1h0m0s) must not exceed queue.nack_backoff_max (1m0s)"},
		{"negative max wait", func(c *queue.Config) { c.MaxWait = -time.Second }, "limits.max_wait: must not be negative, got -1s"},
		{"zero name bytes", func(c *queue.Config) { c.MaxNameBytes = 0 }, "limits.max_name_bytes: must be at least 1, got 0"},
		{"zero partitions", func(c *queue.Config) { c.Partitioned = []queue.Partitioned{{Namespace: "ns", Name: "q"}} },
			"queue.partitioned[0].partitions: is 0; it must be between 1 and 64"},
		{"65 partitions", func(c *queue.Config) {
			c.Partitioned = []queue.Partitioned{{Namespace: "ns", Name: "q", Partitions: 65}}
		},
			"queue.partitioned[0].partitions: is 65; it must be between 1 and 64"},
		{"partitioned without a name", func(c *queue.Config) { c.Partitioned = []queue.Partitioned{{Namespace: "ns", Partitions: 3}} },
			"queue.partitioned[0].name"},
		{"partitioned without a namespace", func(c *queue.Config) { c.Partitioned = []queue.Partitioned{{Name: "q", Partitions: 3}} },
			"queue.partitioned[0].namespace"},
		{"partitioned twice", func(c *queue.Config) {
			c.Partitioned = []queue.Partitioned{{Namespace: "ns", Name: "q", Partitions: 3}, {Namespace: "ns", Name: "q", Partitions: 2}}
		}, "queue.partitioned[1]: names the queue of queue.partitioned[0] again"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := queue.DefaultConfig()
			tt.set(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Validate() = %v, want an error with %q", err, tt.want)
			}
		})
	}
}
