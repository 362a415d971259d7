package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/middleware"
	"github.com/clustron/zaris-go/runtime"
)

// session is a client connected to the cluster for one command.
type session struct {
	kv *zarisclient.Client
	// stats is what the last call cost, recorded by the call-level middleware.
	stats *callStats
}

// Close closes the client.
func (s *session) Close() error { return s.kv.Close() }

// errConfig marks a configuration problem found before dialing (TLS files, --timeout).
var errConfig = errors.New("configuration error")

// connect dials the cluster with the client flags and the environment. The error is a
// *runtime.ConfigError or wraps errConfig when the configuration is wrong (flags, TLS
// files, ZARIS_* variables), and wraps runtime.ErrNoSeeds when no seed answered with a map.
func (c *cli) connect(ctx context.Context) (*session, error) {
	opts, err := c.options()
	if err != nil {
		return nil, err
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	s := &session{}
	kv, err := zarisclient.Dial(ctx, append(opts, runtime.WithCallMiddleware(recordStats(&s.stats)))...)
	if err != nil {
		return nil, err
	}
	s.kv = kv
	return s, nil
}

// call connects, lets do make the command's call and fill in r, and prints r. A
// configuration error is a usage error (exitUsage, no result printed); no reachable seed is
// exitGaveUp; an error from do goes through result.fail.
func (c *cli) call(ctx context.Context, r *result, do func(ctx context.Context, s *session, r *result) error) int {
	s, err := c.connect(ctx)
	if err != nil {
		var cfgErr *runtime.ConfigError
		switch {
		case errors.As(err, &cfgErr), errors.Is(err, errConfig):
			fmt.Fprintf(c.stderr, "zaris: %s\n", reason(err))
			return exitUsage
		case errors.Is(err, runtime.ErrNoSeeds):
			r.Status, r.Exit, r.Error = statusGaveUp, exitGaveUp, reason(err)
		default:
			r.Status, r.Exit, r.Error = statusError, exitError, reason(err)
		}
		return c.finish(r, nil)
	}
	defer s.Close()
	if err := do(ctx, s, r); err != nil {
		r.fail(err)
	}
	return c.finish(r, s.stats)
}

// options turns the client flags and the environment into runtime options.
func (c *cli) options() ([]runtime.Option, error) {
	var seeds []string
	for _, s := range strings.Split(c.seeds, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	opts := []runtime.Option{
		runtime.WithEnv(func(name string) (string, bool) {
			v := c.env(name)
			return v, v != ""
		}),
		runtime.WithSeeds(seeds...),
		runtime.WithProtocol(runtime.Protocol(c.protocol)),
		runtime.WithTransport(runtime.Transport(c.transport)),
	}
	if c.timeout < 0 {
		return nil, fmt.Errorf("%w: --timeout %s: must not be negative", errConfig, c.timeout)
	}
	if c.timeout > 0 {
		opts = append(opts, runtime.WithRequestTimeout(c.timeout))
	}
	if c.attempts < 0 {
		return nil, fmt.Errorf("%w: --max-attempts %d: must not be negative", errConfig, c.attempts)
	}
	if c.attempts > 0 {
		opts = append(opts, runtime.WithDefaultMaxAttempts(c.attempts))
	}
	tlsCfg, err := c.tlsConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	if tlsCfg != nil {
		opts = append(opts, runtime.WithTLS(tlsCfg))
	}
	return opts, nil
}

// tlsConfig builds the TLS configuration from --tls-ca, --tls-cert and --tls-key, or returns
// nil when none is given. Without --tls-ca the system's roots verify the nodes.
func (c *cli) tlsConfig() (*tls.Config, error) {
	if c.tlsCA == "" && c.tlsCert == "" && c.tlsKey == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.tlsCA != "" {
		pem, err := os.ReadFile(c.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("--tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--tls-ca %s: no PEM certificate in the file", c.tlsCA)
		}
		cfg.RootCAs = pool
	}
	switch {
	case c.tlsCert != "" && c.tlsKey != "":
		cert, err := tls.LoadX509KeyPair(c.tlsCert, c.tlsKey)
		if err != nil {
			return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	case c.tlsCert != "":
		return nil, errors.New("--tls-cert needs --tls-key")
	case c.tlsKey != "":
		return nil, errors.New("--tls-key needs --tls-cert")
	}
	return cfg, nil
}

// recordStats returns call-level middleware that stores what each call cost in *dst once
// the call is over (zaris makes one call per run).
func recordStats(dst **callStats) middleware.Middleware {
	return func(next middleware.Handler) middleware.Handler {
		return func(ctx context.Context, call *runtime.Call) (runtime.Response, error) {
			resp, err := next(ctx, call)
			*dst = newCallStats(call)
			return resp, err
		}
	}
}
