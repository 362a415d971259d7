package runtime

import (
	"crypto/tls"
	"slices"
	"time"

	"github.com/clustron/zaris-go/runtime/clock"
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

type optionFunc func(*configBuilder)

func (f optionFunc) applyOption(b *configBuilder) { f(b) }

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
func WithClock(c clock.Clock) Option {
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
// by middleware.NewTokenBudget. Share one budget between the stacks of one client.
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

// WithPipelining turns pipelined connections on (the default) or off, in place of
// ZARIS_PIPELINE (see Pipelining).
func WithPipelining(on bool) Option {
	return optionFunc(func(b *configBuilder) { b.cfg.Pipelining = on })
}

// WithPipelineConns sets how many pipelined connections per node the calls share (n >= 1,
// default 2). It does not turn pipelining on.
func WithPipelineConns(n int) Option {
	return optionFunc(func(b *configBuilder) { b.cfg.PipelineConns = n })
}
