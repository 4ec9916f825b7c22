package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// dial returns a client connection to coordd. It does not connect yet: the
// first call does, and a coordd that cannot be reached makes that call fail
// with UNAVAILABLE.
func (g *globalOptions) dial() (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	if g.tls {
		cfg, err := g.tlsConfig()
		if err != nil {
			return nil, err
		}
		creds = credentials.NewTLS(cfg)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds), grpc.WithUserAgent("coordctl")}
	if g.apiKey != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(g.apiKey)))
	}
	conn, err := grpc.NewClient(g.addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("--addr %s: %w", g.addr, err)
	}
	return conn, nil
}

func (g *globalOptions) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: g.serverName}
	if g.caFile != "" {
		pem, err := os.ReadFile(g.caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s: no PEM certificate in it", g.caFile)
		}
	}
	if g.certFile != "" {
		cert, err := tls.LoadX509KeyPair(g.certFile, g.keyFile)
		if err != nil {
			return nil, fmt.Errorf("--cert-file/--key-file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// bearer sends an API key with every call as `authorization: Bearer KEY`.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity is false so that a key also works with a coordd
// on loopback without TLS; beyond loopback, use --tls.
func (bearer) RequireTransportSecurity() bool { return false }
