package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

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
// It records what the bootstrap cost in c.bootstrap, whatever the outcome.
func (c *cli) connect(ctx context.Context) (*session, error) {
	opts, seeds, err := c.options()
	if err != nil {
		return nil, err
	}
	// The whole configuration, every seed included, is checked before any is dialed.
	if _, err := runtime.NewConfig(append(opts, runtime.WithSeeds(seeds...))...); err != nil {
		return nil, err
	}
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	s := &session{}
	opts = append(opts, runtime.WithCallMiddleware(recordStats(&s.stats)))
	kv, err := c.bootstrapFrom(ctx, seeds, opts)
	if err != nil {
		return nil, err
	}
	s.kv = kv
	return s, nil
}

// bootstrapFrom asks the seeds for the first map one at a time, in order, as
// zarisclient.Dial would, and returns the client of the first that answers; it dials each
// seed alone so that c.bootstrap can tell each one's outcome and time (the client then
// fetches later maps from the nodes of its map). When none answers the error wraps
// runtime.ErrNoSeeds and says why each failed, that ctx ended the bootstrap if it did, and
// what a node that closed the connection without answering may not speak.
func (c *cli) bootstrapFrom(ctx context.Context, seeds []string, opts []runtime.Option) (*zarisclient.Client, error) {
	start := time.Now()
	c.bootstrap = &bootstrapStats{Seeds: []seedStats{}}
	defer func() { c.bootstrap.ElapsedMS = ms(time.Since(start)) }()
	var errs []error
	var lines []string
	closed := false
	for _, seed := range seeds {
		t0 := time.Now()
		kv, err := zarisclient.Dial(ctx, append(opts, runtime.WithSeeds(seed))...)
		st := seedStats{Addr: seed, Outcome: "Ok", DurationMS: ms(time.Since(t0))}
		if err == nil {
			c.bootstrap.Seeds = append(c.bootstrap.Seeds, st)
			return kv, nil
		}
		cause := seedCause(err)
		st.Outcome, st.Error = seedOutcome(cause), reason(cause)
		c.bootstrap.Seeds = append(c.bootstrap.Seeds, st)
		errs = append(errs, err)
		if st.Outcome == "Closed" {
			closed = true
			lines = append(lines, fmt.Sprintf("seed %s: the node closed the connection without answering (%s)", seed, st.Error))
		} else {
			lines = append(lines, fmt.Sprintf("seed %s: %s", seed, st.Error))
		}
		if expired(ctx) {
			break
		}
	}
	msg := "no seed reachable: "
	switch {
	case expired(ctx) && c.timeout > 0:
		msg = fmt.Sprintf("--timeout %s passed before a seed answered with the cluster map (%d of %d seeds asked): ", c.timeout, len(lines), len(seeds))
	case errors.Is(ctx.Err(), context.Canceled):
		msg = fmt.Sprintf("interrupted before a seed answered with the cluster map (%d of %d seeds asked): ", len(lines), len(seeds))
	}
	msg += strings.Join(lines, "; ")
	if closed {
		msg += fmt.Sprintf(": does the cluster speak --protocol %s, --transport %s, %s?", c.protocol, c.transport, c.tlsHint())
	}
	return nil, &bootstrapError{msg: msg, err: errors.Join(errs...)}
}

// expired reports whether ctx has ended or its deadline has passed (a socket deadline may
// end a fetch before the context's timer fires).
func expired(ctx context.Context) bool {
	if ctx.Err() != nil {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// seedCause returns the cause in a one-seed Dial's error, "no seed reachable: seed ADDR:
// cause", or err itself if it is not of that form.
func seedCause(err error) error {
	multi, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return err
	}
	for _, e := range multi.Unwrap() {
		if j, ok := e.(interface{ Unwrap() []error }); ok && len(j.Unwrap()) == 1 {
			if cause := errors.Unwrap(j.Unwrap()[0]); cause != nil {
				return cause
			}
		}
	}
	return err
}

// tlsHint names whether the client spoke TLS, for the hint about a node that closed the
// connection.
func (c *cli) tlsHint() string {
	if c.tlsCA != "" || c.tlsCert != "" {
		return "over TLS"
	}
	return "without TLS"
}

// bootstrapError is a failed bootstrap: its text says why, and it wraps each seed's error
// (so runtime.ErrNoSeeds, and the cause of each).
type bootstrapError struct {
	msg string
	err error
}

func (e *bootstrapError) Error() string { return e.msg }
func (e *bootstrapError) Unwrap() error { return e.err }

// seedOutcome names how asking a seed for the map failed: Refused (nothing listens),
// Closed (the node closed the connection without an answer, as one does that speaks
// another protocol), AttemptTimeout, DeadlineExceeded, Canceled or Error.
func seedOutcome(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "Refused"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "Closed"
	case errors.Is(err, context.DeadlineExceeded):
		return "DeadlineExceeded"
	case errors.Is(err, runtime.ErrAttemptTimeout):
		return "AttemptTimeout"
	case errors.Is(err, context.Canceled):
		return "Canceled"
	}
	return "Error"
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
		return c.finish(r, c.withBootstrap(nil))
	}
	defer s.Close()
	if err := do(ctx, s, r); err != nil {
		r.fail(err)
	}
	return c.finish(r, c.withBootstrap(s.stats))
}

// withBootstrap returns stats (a call's, or nil when no call was made) with the bootstrap's
// cost, if a bootstrap was tried.
func (c *cli) withBootstrap(stats *callStats) *callStats {
	if c.bootstrap == nil {
		return stats
	}
	if stats == nil {
		stats = &callStats{Statuses: []string{}, History: []attemptStats{}, noCall: true}
	}
	stats.Bootstrap = c.bootstrap
	return stats
}

// options turns the client flags and the environment into runtime options, the seeds apart.
func (c *cli) options() ([]runtime.Option, []string, error) {
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
		runtime.WithProtocol(runtime.Protocol(c.protocol)),
		runtime.WithTransport(runtime.Transport(c.transport)),
	}
	if c.timeout < 0 {
		return nil, nil, fmt.Errorf("%w: --timeout %s: must not be negative", errConfig, c.timeout)
	}
	if c.timeout > 0 {
		opts = append(opts, runtime.WithRequestTimeout(c.timeout))
	}
	if c.attempts < 0 {
		return nil, nil, fmt.Errorf("%w: --max-attempts %d: must not be negative", errConfig, c.attempts)
	}
	if c.attempts > 0 {
		opts = append(opts, runtime.WithDefaultMaxAttempts(c.attempts))
	}
	tlsCfg, err := c.tlsConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errConfig, err)
	}
	if tlsCfg != nil {
		opts = append(opts, runtime.WithTLS(tlsCfg))
	}
	return opts, seeds, nil
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
