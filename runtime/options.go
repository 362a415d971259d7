package runtime

import (
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// The environment variables a client reads when it is built (NewConfig, Dial). A value
// that does not parse is an error naming the variable and the value, never a silent default.
const (
	// EnvRequestTimeout bounds a whole call (rule R4): a Go duration ("90s", "1m30s"), a
	// whole number of seconds ("60"), or "infinite" for no bound.
	EnvRequestTimeout = "ZARIS_REQUEST_TIMEOUT"
	// EnvDisableRetries, when true (strconv.ParseBool), makes every call a single attempt,
	// whatever else is configured (rule R7).
	EnvDisableRetries = "ZARIS_DISABLE_RETRIES"
	// EnvRefreshWaitMS is the longest a caller waits for a shared map refresh, in whole
	// milliseconds (rule R6).
	EnvRefreshWaitMS = "ZARIS_CLIENT_MAP_REFRESH_WAIT_MS"
)

// Defaults of the Config fields outside RetryPolicy (which has DefaultRetryPolicy).
const (
	// DefaultPoolSize is the default cap of open connections per node.
	DefaultPoolSize = 16
	// DefaultDialTimeout is the default bound on opening one connection.
	DefaultDialTimeout = time.Second
	// DefaultAttemptTimeout is the default bound on one attempt on the wire (rule B5).
	DefaultAttemptTimeout = 5 * time.Second
	// DefaultRefreshWait is the default longest wait for a shared map refresh (rule R6).
	DefaultRefreshWait = 15 * time.Second
	// DefaultRefreshDebounce is the default window after a completed refresh in which a new
	// request is a no-op (rule R6).
	DefaultRefreshDebounce = 500 * time.Millisecond
)

// Option sets one part of a client's configuration; pass options to Dial (or the
// generated zarisclient.Dial) or NewConfig. Options are applied in order after the
// defaults and the environment, so an explicit option beats the environment, which beats
// the default; ZARIS_DISABLE_RETRIES=true wins over every option (rule R7). A per-call
// CallOption is not an Option: the client-wide counterparts of WithMaxAttempts and
// WithTimeout are WithDefaultMaxAttempts and WithRequestTimeout.
type Option interface {
	applyOption(*configBuilder)
}

// configBuilder is the state NewConfig threads through the options.
type configBuilder struct {
	cfg            Config
	disableRetries bool // WithRetriesDisabled was given
	errs           []error
}

func (b *configBuilder) fail(field, value, reason string) {
	b.errs = append(b.errs, &ConfigError{Field: field, Value: value, Reason: reason})
}

type optionFunc func(*configBuilder)

func (f optionFunc) applyOption(b *configBuilder) { f(b) }

// envOption carries WithEnv's lookup; NewConfig picks it out before reading the environment.
type envOption struct {
	lookup func(string) (string, bool)
}

func (envOption) applyOption(*configBuilder) {}

// ConfigError says why a configuration was rejected: which field (and, for a value read
// from the environment, which variable) and what value. NewConfig and Dial return it
// (joined with any others, so find it with errors.As).
type ConfigError struct {
	// Field is the Config field, for example "PoolSize" or "Retry.RequestTimeout".
	Field string
	// Var is the environment variable the value came from, or "" for an option.
	Var string
	// Value is the offending value as given.
	Value string
	// Reason says what is wrong with it.
	Reason string
}

// Error names the variable or field, the value and the reason.
func (e *ConfigError) Error() string {
	if e.Var != "" {
		return fmt.Sprintf("zaris: config: %s=%q: %s", e.Var, e.Value, e.Reason)
	}
	return fmt.Sprintf("zaris: config: %s %s: %s", e.Field, e.Value, e.Reason)
}

// NewConfig builds a validated Config: the defaults (DefaultRetryPolicy, DefaultPipelining
// and the Default constants), then the environment (EnvRequestTimeout, EnvDisableRetries,
// EnvRefreshWaitMS, EnvPipeline, read through os.LookupEnv unless WithEnv says otherwise),
// then opts in order, then validation, then rule R7. The error, if any, joins one *ConfigError per problem.
func NewConfig(opts ...Option) (Config, error) {
	b := &configBuilder{cfg: Config{
		Protocol:        ProtocolBinary,
		Transport:       TransportFramed,
		PoolSize:        DefaultPoolSize,
		DialTimeout:     DefaultDialTimeout,
		AttemptTimeout:  DefaultAttemptTimeout,
		Retry:           DefaultRetryPolicy,
		RefreshWait:     DefaultRefreshWait,
		RefreshDebounce: DefaultRefreshDebounce,
		Clock:           SystemClock,
		Pipeline:        DefaultPipelining,
	}}
	lookup := os.LookupEnv
	for _, o := range opts {
		if e, ok := o.(envOption); ok {
			lookup = e.lookup
		}
	}
	envDisabled := false
	if lookup != nil {
		envDisabled = b.applyEnv(lookup)
	}
	for _, o := range opts {
		if o != nil {
			o.applyOption(b)
		}
	}
	b.validate()
	if len(b.errs) > 0 {
		return Config{}, errors.Join(b.errs...)
	}
	if envDisabled || b.disableRetries {
		b.cfg.Retry.Disabled = true
		b.cfg.Retry.MaxAttempts = 1
	}
	return b.cfg, nil
}

// applyEnv reads the environment into b.cfg and reports whether EnvDisableRetries is true.
// An empty variable counts as unset.
func (b *configBuilder) applyEnv(lookup func(string) (string, bool)) (disable bool) {
	get := func(name string) (string, bool) {
		v, ok := lookup(name)
		v = strings.TrimSpace(v)
		return v, ok && v != ""
	}
	envErr := func(field, name, value, reason string) {
		b.errs = append(b.errs, &ConfigError{Field: field, Var: name, Value: value, Reason: reason})
	}
	if v, ok := get(EnvRequestTimeout); ok {
		if d, err := parseRequestTimeout(v); err != nil {
			envErr("Retry.RequestTimeout", EnvRequestTimeout, v, err.Error())
		} else {
			b.cfg.Retry.RequestTimeout = d
		}
	}
	if v, ok := get(EnvDisableRetries); ok {
		if on, err := strconv.ParseBool(v); err != nil {
			envErr("Retry.Disabled", EnvDisableRetries, v, "not a boolean (true, false, 1, 0, ...)")
		} else {
			disable = on
		}
	}
	if v, ok := get(EnvRefreshWaitMS); ok {
		ms, err := strconv.ParseInt(v, 10, 64)
		switch {
		case err != nil:
			envErr("RefreshWait", EnvRefreshWaitMS, v, "not a whole number of milliseconds")
		case ms < 0:
			envErr("RefreshWait", EnvRefreshWaitMS, v, "must not be negative")
		case ms > math.MaxInt64/int64(time.Millisecond):
			envErr("RefreshWait", EnvRefreshWaitMS, v, "too large")
		default:
			b.cfg.RefreshWait = time.Duration(ms) * time.Millisecond
		}
	}
	b.applyPipelineEnv(get, envErr)
	return disable
}

// parseRequestTimeout reads ZARIS_REQUEST_TIMEOUT: "infinite" (no bound, 0), whole seconds,
// or a positive Go duration.
func parseRequestTimeout(v string) (time.Duration, error) {
	if strings.EqualFold(v, "infinite") {
		return 0, nil
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0, errors.New(`must be positive (use "infinite" for no bound)`)
		}
		if secs > math.MaxInt64/int64(time.Second) {
			return 0, errors.New("too large")
		}
		return time.Duration(secs) * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, errors.New(`not a duration ("90s"), whole seconds ("60") or "infinite"`)
	}
	if d <= 0 {
		return 0, errors.New(`must be positive (use "infinite" for no bound)`)
	}
	return d, nil
}

// validate appends a *ConfigError for every field that makes no sense.
func (b *configBuilder) validate() {
	c := &b.cfg
	if len(c.Seeds) == 0 {
		b.fail("Seeds", "[]", "at least one seed address is required")
	}
	for _, s := range c.Seeds {
		host, port, err := net.SplitHostPort(s)
		switch {
		case strings.ContainsFunc(s, unicode.IsSpace):
			err = errors.New("contains a space")
		case err == nil && host == "":
			err = errors.New("missing host")
		}
		if err == nil {
			if n, perr := strconv.Atoi(port); perr != nil || n < 1 || n > 65535 {
				err = errors.New("port must be 1..65535")
			}
		}
		if err != nil {
			b.fail("Seeds", strconv.Quote(s), "not a host:port address: "+err.Error())
		}
	}
	switch c.Protocol {
	case ProtocolBinary, ProtocolCompact, ProtocolJSON, ProtocolHeader:
	default:
		b.fail("Protocol", strconv.Quote(string(c.Protocol)), "unknown protocol (binary, compact, json, header)")
	}
	switch c.Transport {
	case TransportFramed, TransportBuffered:
	default:
		b.fail("Transport", strconv.Quote(string(c.Transport)), "unknown transport (framed, buffered)")
	}
	if c.PoolSize < 1 {
		b.fail("PoolSize", strconv.Itoa(c.PoolSize), "must be at least 1")
	}
	positive := func(field string, d time.Duration) {
		if d <= 0 {
			b.fail(field, d.String(), "must be positive")
		}
	}
	notNegative := func(field string, d time.Duration) {
		if d < 0 {
			b.fail(field, d.String(), "must not be negative")
		}
	}
	positive("DialTimeout", c.DialTimeout)
	positive("AttemptTimeout", c.AttemptTimeout)
	notNegative("Retry.Backoff", c.Retry.Backoff)
	notNegative("Retry.MaxBackoff", c.Retry.MaxBackoff)
	notNegative("Retry.RequestTimeout", c.Retry.RequestTimeout)
	notNegative("RefreshWait", c.RefreshWait)
	notNegative("RefreshDebounce", c.RefreshDebounce)
	if c.Retry.MaxAttempts < 1 {
		b.fail("Retry.MaxAttempts", strconv.Itoa(c.Retry.MaxAttempts), "must be at least 1")
	}
	if c.Retry.SlowFactor < 0 {
		b.fail("Retry.SlowFactor", strconv.Itoa(c.Retry.SlowFactor), "must not be negative")
	}
	if c.Clock == nil {
		b.fail("Clock", "nil", "a clock is required")
	}
	for i, cl := range c.Classifiers {
		if cl == nil {
			b.fail("Classifiers", fmt.Sprintf("[%d] nil", i), "a classifier must not be nil")
		}
	}
	b.validatePipeline()
}

// WithSeeds sets the host:port addresses the first cluster map is fetched from (and
// refetched from when no node of the current map answers). At least one is required; each
// must be host:port exactly, without spaces (trim what you split from a list).
func WithSeeds(addrs ...string) Option {
	seeds := append([]string(nil), addrs...)
	return optionFunc(func(b *configBuilder) { b.cfg.Seeds = seeds })
}

// WithProtocol sets the Thrift protocol. Default binary.
func WithProtocol(p Protocol) Option {
	return optionFunc(func(b *configBuilder) { b.cfg.Protocol = p })
}

// WithTransport sets the Thrift transport under the protocol (ignored by header, which
// frames itself). Default framed.
func WithTransport(t Transport) Option {
	return optionFunc(func(b *configBuilder) { b.cfg.Transport = t })
}

// WithTLS makes every connection a TLS connection with cfg (nil: plain TCP, the default).
// When cfg.ServerName is empty the dialer uses the node's host name.
func WithTLS(cfg *tls.Config) Option {
	return optionFunc(func(b *configBuilder) { b.cfg.TLS = cfg })
}

// WithPoolSize caps the open connections per node (n >= 1). Default 16. A generated Thrift
// client carries one request at a time, so with pipelining off this is also the most calls
// in flight per node.
func WithPoolSize(n int) Option {
	return optionFunc(func(b *configBuilder) { b.cfg.PoolSize = n })
}

// WithDialTimeout bounds opening one connection, TLS handshake included. Default 1 s.
func WithDialTimeout(d time.Duration) Option {
	return optionFunc(func(b *configBuilder) { b.cfg.DialTimeout = d })
}

// WithAttemptTimeout bounds one attempt (waiting for a pooled connection, writing the
// request, reading the reply), distinct from the whole-call deadline (rule B5). Default 5 s.
// An attempt may end up to d/64 past it, never more than 10 ms past it; on a pipelined
// connection up to 1 ms past it when d/64 is shorter.
func WithAttemptTimeout(d time.Duration) Option {
	return optionFunc(func(b *configBuilder) { b.cfg.AttemptTimeout = d })
}

// WithBackoff sets the base retry delay: before attempt n+1 a call waits d*n (rule R5).
// Default 100 ms.
func WithBackoff(d time.Duration) Option {
	return optionFunc(func(b *configBuilder) { b.cfg.Retry.Backoff = d })
}

// WithRequestTimeout bounds every call, all attempts and delays included (rule R4), in
// place of ZARIS_REQUEST_TIMEOUT and the 60 s default. d must be positive; use
// WithoutRequestTimeout for no bound.
func WithRequestTimeout(d time.Duration) Option {
	return optionFunc(func(b *configBuilder) {
		if d <= 0 {
			b.fail("Retry.RequestTimeout", d.String(), "must be positive (use WithoutRequestTimeout for no bound)")
			return
		}
		b.cfg.Retry.RequestTimeout = d
	})
}

// WithoutRequestTimeout removes the whole-call bound, like ZARIS_REQUEST_TIMEOUT=infinite;
// calls are then bounded by their attempts and their context only.
func WithoutRequestTimeout() Option {
	return optionFunc(func(b *configBuilder) { b.cfg.Retry.RequestTimeout = 0 })
}

// WithRetriesDisabled makes every call a single attempt, like ZARIS_DISABLE_RETRIES=true
// (rule R7); it wins over WithMaxAttempts.
func WithRetriesDisabled() Option {
	return optionFunc(func(b *configBuilder) { b.disableRetries = true })
}

// WithRefreshWait sets the longest a caller waits for a shared map refresh before going on
// without it (rule R6), in place of ZARIS_CLIENT_MAP_REFRESH_WAIT_MS and the 15 s default.
// Zero means callers never wait; the refresh still runs for the map.
func WithRefreshWait(d time.Duration) Option {
	return optionFunc(func(b *configBuilder) { b.cfg.RefreshWait = d })
}

// WithRefreshDebounce sets the window after a completed refresh in which a new request is
// a no-op unless it carries a newer epoch (rules R6, B1). Default 500 ms; zero disables it.
func WithRefreshDebounce(d time.Duration) Option {
	return optionFunc(func(b *configBuilder) { b.cfg.RefreshDebounce = d })
}

// WithClock sets the source of time for every timing rule; tests pass a fake one.
func WithClock(c Clock) Option {
	return optionFunc(func(b *configBuilder) { b.cfg.Clock = c })
}

// WithService sets the generated service the engine speaks (zarisclient.Service); the
// generated zarisclient.Dial gives it, so only a direct runtime.Dial needs it.
func WithService(s *Service) Option {
	return optionFunc(func(b *configBuilder) { b.cfg.Service = s })
}

// WithDialer replaces the built-in dialer, for example to count or fake connections in
// tests, or to dial through a proxy. Nil restores the built-in one. Its connections carry
// the service's generated client (Conn.Client).
func WithDialer(d Dialer) Option {
	return optionFunc(func(b *configBuilder) { b.cfg.Dialer = d })
}

// WithEnv makes NewConfig read the environment through lookup instead of os.LookupEnv, so
// tests can set variables without touching the process environment. A nil lookup ignores
// the environment.
func WithEnv(lookup func(string) (string, bool)) Option {
	return envOption{lookup: lookup}
}

// WithDefaultMaxAttempts caps the attempts of every call, the first included (rule R4),
// in place of the default 3; a call's own WithMaxAttempts overrides it. n must be at least
// 1. ZARIS_DISABLE_RETRIES and WithRetriesDisabled still make every call a single attempt.
func WithDefaultMaxAttempts(n int) Option {
	return optionFunc(func(b *configBuilder) { b.cfg.Retry.MaxAttempts = n })
}

// WithRetryPolicy replaces every number of the retry rules at once (rules R4, R5, R7);
// start from DefaultRetryPolicy. p.RequestTimeout zero means no whole-call bound, and
// p.Disabled true acts as WithRetriesDisabled.
func WithRetryPolicy(p RetryPolicy) Option {
	return optionFunc(func(b *configBuilder) {
		b.cfg.Retry = p
		if p.Disabled {
			b.disableRetries = true
		}
	})
}

// WithCallMiddleware adds call-level middleware to the default stack, in front of the
// deadline and retry layers: it runs once per call and sees the call's final outcome (the
// answer, or the *CallError with every attempt). The first listed is the outermost;
// repeated options append. Wrap one in middleware.ForOps to apply it to some operations.
func WithCallMiddleware(mw ...Middleware) Option {
	mw = slices.Clone(mw)
	return optionFunc(func(b *configBuilder) { b.cfg.CallMiddleware = append(b.cfg.CallMiddleware, mw...) })
}

// WithAttemptMiddleware adds attempt-level middleware to the default stack, between the
// classify layer and the transport: it runs once per attempt and sees the transport's raw
// outcome before it is classified. The first listed is the outermost; repeated options
// append.
func WithAttemptMiddleware(mw ...Middleware) Option {
	mw = slices.Clone(mw)
	return optionFunc(func(b *configBuilder) { b.cfg.AttemptMiddleware = append(b.cfg.AttemptMiddleware, mw...) })
}

// WithRetryBudget charges every call of the client to budget (rule B3), normally one made
// by middleware.NewRetryBudget. Share one budget between the stacks of one client.
func WithRetryBudget(budget RetryBudget) Option {
	return optionFunc(func(b *configBuilder) { b.cfg.RetryBudget = budget })
}

// WithClassifiers replaces the default classifier chain (middleware.DefaultClassifiers)
// with c, none of them nil. To extend the default chain, pass your classifiers followed by
// middleware.DefaultClassifiers.
func WithClassifiers(c ...Classifier) Option {
	c = slices.Clone(c)
	return optionFunc(func(b *configBuilder) { b.cfg.Classifiers = c })
}

// Pipelined connections: the option, its environment variable and its validation.

// EnvPipeline, when false (strconv.ParseBool), turns pipelined connections off, so every
// call takes a pooled connection; true turns them on. An option beats it.
const EnvPipeline = "ZARIS_PIPELINE"

// Pipelining configures the pipelined connection mode. In it, the calls to one node share
// Conns connections: each call queues its encoded request, everything queued goes out in
// one write, and replies are matched to requests in order by seqid. A request still queued
// when its attempt ends was never sent (Attempt.Sent false); one written and not answered
// is in doubt (rule B2). A call with no other in flight to its node takes a pooled
// connection. Off, each call borrows a connection of the pool for itself (PoolSize).
// Pipelining needs the built-in dialer: with WithDialer the pool is used.
type Pipelining struct {
	// Enabled turns the mode on. Default true.
	Enabled bool
	// Conns is the most connections per node the calls share (>= 1). Default 2. Calls share
	// the connections open until each carries 8 calls queued or in flight; the next call
	// then opens another, up to Conns.
	Conns int
}

// DefaultPipelining is the mode a client starts from before the environment and options:
// on, with 2 connections per node (tools/zarisbench/README.md has the measurements).
var DefaultPipelining = Pipelining{Enabled: true, Conns: 2}

// WithPipelining turns pipelined connections on (the default) or off, in place of
// ZARIS_PIPELINE (see Pipelining).
func WithPipelining(on bool) Option {
	return optionFunc(func(b *configBuilder) { b.cfg.Pipeline.Enabled = on })
}

// WithPipelineConns sets how many pipelined connections per node the calls share (n >= 1,
// default 2). It does not turn pipelining on.
func WithPipelineConns(n int) Option {
	return optionFunc(func(b *configBuilder) { b.cfg.Pipeline.Conns = n })
}

func (b *configBuilder) applyPipelineEnv(get func(string) (string, bool), envErr func(field, name, value, reason string)) {
	if v, ok := get(EnvPipeline); ok {
		if on, err := strconv.ParseBool(v); err != nil {
			envErr("Pipeline.Enabled", EnvPipeline, v, "not a boolean (true, false, 1, 0, ...)")
		} else {
			b.cfg.Pipeline.Enabled = on
		}
	}
}

func (b *configBuilder) validatePipeline() {
	if n := b.cfg.Pipeline.Conns; n < 1 {
		b.fail("Pipeline.Conns", strconv.Itoa(n), "must be at least 1")
	}
}
