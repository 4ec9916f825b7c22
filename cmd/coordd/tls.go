package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
)

// TLSConfig is the tls section: TLS on the gRPC port when cert_file and
// key_file are set, mutual TLS when client_ca_file is too.
type TLSConfig struct {
	CertFile     string `mapstructure:"cert_file"`
	KeyFile      string `mapstructure:"key_file"`
	ClientCAFile string `mapstructure:"client_ca_file"`
	// ClientAuth: "require" (the default with a client_ca_file: a client
	// must present a certificate the CA signed), "verify_if_given" (one
	// without a certificate may authenticate with an API key), or "none".
	ClientAuth string `mapstructure:"client_auth"`
}

func (c TLSConfig) enabled() bool { return c.CertFile != "" || c.KeyFile != "" }

func (c TLSConfig) validate(bad func(key, format string, args ...any)) {
	if (c.CertFile == "") != (c.KeyFile == "") {
		bad("tls.cert_file", "and tls.key_file must be set together")
	}
	if c.ClientCAFile != "" && !c.enabled() {
		bad("tls.client_ca_file", "needs tls.cert_file and tls.key_file")
	}
	switch c.ClientAuth {
	case "", "require", "verify_if_given", "none":
	default:
		bad("tls.client_auth", "%q is not require, verify_if_given or none", c.ClientAuth)
	}
}

// tlsFiles serves the gRPC port's TLS from files it can reload: every new
// connection gets the configuration last loaded, connections already open
// keep theirs.
type tlsFiles struct{ current atomic.Pointer[tls.Config] }

// load reads c's files; on error the running configuration stays.
func (t *tlsFiles) load(c TLSConfig) error {
	cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
	if err != nil {
		return fmt.Errorf("tls.cert_file, tls.key_file: %w", err)
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"h2"},
	}
	if c.ClientCAFile != "" {
		pem, err := os.ReadFile(c.ClientCAFile)
		if err != nil {
			return fmt.Errorf("tls.client_ca_file: %w", err)
		}
		cfg.ClientCAs = x509.NewCertPool()
		if !cfg.ClientCAs.AppendCertsFromPEM(pem) {
			return errors.New("tls.client_ca_file: no certificate in it")
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		if c.ClientAuth == "verify_if_given" {
			cfg.ClientAuth = tls.VerifyClientCertIfGiven
		}
	}
	if c.ClientAuth == "none" {
		cfg.ClientAuth, cfg.ClientCAs = tls.NoClientCert, nil
	}
	t.current.Store(cfg)
	return nil
}

// serverConfig is the configuration to serve with: it hands each new
// connection the files last loaded.
func (t *tlsFiles) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return t.current.Load(), nil
		},
	}
}
