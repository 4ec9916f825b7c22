package console

import (
	"fmt"
	"regexp"

	"github.com/coordd/coordd/internal/validate"
)

// Config is the ui section of coordd's configuration.
type Config struct {
	// Enabled serves the console at /ui/ on the HTTP port; default false.
	Enabled bool `mapstructure:"enabled"`
	// AllowedHosts are the host names, besides IP literals and localhost,
	// that the console answers to (the Host header, without a port): the
	// names operators use to reach the HTTP port. Default none.
	AllowedHosts []string `mapstructure:"allowed_hosts"`
}

// DefaultConfig is the console off, with no host names.
func DefaultConfig() Config { return Config{AllowedHosts: []string{}} }

var hostName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*\.?$`)

// Validate checks that each allowed host is a host name (no port, scheme,
// path or wildcard), naming the first bad one.
func (c Config) Validate() error {
	var v validate.Checks
	for i, h := range c.AllowedHosts {
		if len(h) > 253 || !hostName.MatchString(h) {
			v.Bad(fmt.Sprintf("ui.allowed_hosts[%d]", i), "%q is not a host name (no port, scheme or wildcard)", h)
		}
	}
	return v.Err()
}
