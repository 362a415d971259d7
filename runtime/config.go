package runtime

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/clustron/zaris-go/runtime/clock"
)

// Protocol names a Thrift protocol the client speaks.
type Protocol string

// The protocols a client can speak. Every store node accepts binary, compact and header on
// one port; json needs a node configured for it.
const (
	ProtocolBinary  Protocol = "binary"
	ProtocolCompact Protocol = "compact"
	ProtocolJSON    Protocol = "json"
	ProtocolHeader  Protocol = "header"
)

// Transport names the Thrift transport under the protocol.
type Transport string

// The transports a client can use. Header ignores the choice: it frames itself.
const (
	TransportFramed   Transport = "framed"
	TransportBuffered Transport = "buffered"
)

// RetryPolicy holds the numbers of rules R4, R5, R7 and B7. Its zero value is not useful; the
// client's defaults come from DefaultRetryPolicy and the environment.
type RetryPolicy struct {
	// MaxAttempts caps the attempts of one call, the first included (R4). Default 3.
	MaxAttempts int
	// Backoff is the base delay: before attempt n+1 the client waits Backoff*n (R5); zero
	// means no wait. Default 100 ms.
	Backoff time.Duration
	// MaxBackoff caps one delay (R5); zero means no cap. Default 2 s.
	MaxBackoff time.Duration
	// SlowFactor, when positive, replaces the factor the IDL declares for each slow status
	// (zaris.slow_backoff on the status enum) that multiplies the delay after an answer
	// carrying it (R5); 1 turns the slower backoff off. Zero, the default, keeps the IDL's.
	SlowFactor int
	// RequestTimeout bounds a whole call, all attempts and delays included (R4); it comes from
	// ZARIS_REQUEST_TIMEOUT. Zero means no bound ("infinite"). Default 60 s.
	RequestTimeout time.Duration
	// Disabled makes every call a single attempt (R7, ZARIS_DISABLE_RETRIES=true).
	Disabled bool
	// OwnerWait is the longest a call waits, counted from its first attempt that could not
	// reach its node at all, for a map that names another owner before it retries (B7);
	// the wait stands in for the backoff. Zero means no such wait: the call backs off as
	// R5 says. Default 5 s, the default attempt timeout.
	OwnerWait time.Duration
}

// The settings a client starts from before the environment and options.
var (
	// DefaultRetryPolicy is the retry rules' numbers.
	DefaultRetryPolicy = RetryPolicy{
		MaxAttempts:    3,
		Backoff:        100 * time.Millisecond,
		MaxBackoff:     2 * time.Second,
		RequestTimeout: 60 * time.Second,
		OwnerWait:      5 * time.Second,
	}
)

// Config is a client's complete, validated configuration. Build one with NewConfig (Dial
// calls it): defaults, then the environment, then the options (an explicit option beats the
// environment, which beats the default), and values that make no sense are rejected.
type Config struct {
	// Seeds are host:port addresses of nodes to fetch the first cluster map from.
	Seeds []string
	// Protocol is the Thrift protocol. Default binary.
	Protocol Protocol
	// Transport is the Thrift transport. Default framed.
	Transport Transport
	// TLS, when set, makes every connection a TLS connection with this configuration.
	TLS *tls.Config
	// PoolSize caps the open connections per node. Default 16.
	PoolSize int
	// DialTimeout bounds opening one connection. Default 1 s.
	DialTimeout time.Duration
	// AttemptTimeout bounds one attempt on the wire, distinct from the whole-call deadline
	// (B5). Default 5 s.
	AttemptTimeout time.Duration
	// Retry holds the retry rules' numbers.
	Retry RetryPolicy
	// RefreshWait is the longest a caller waits for a shared map refresh before going on
	// without it (R6, ZARIS_CLIENT_MAP_REFRESH_WAIT_MS). Default 15 s.
	RefreshWait time.Duration
	// RefreshDebounce makes a refresh requested within this time of the last completed one a
	// no-op, unless an answer showed a newer epoch (R6, B1). Default 500 ms.
	RefreshDebounce time.Duration
	// Clock is the source of time. Default clock.System.
	Clock clock.Clock
	// Pipelining turns the pipelined connection mode on (WithPipelining). Default true. In
	// it, the calls to one node share PipelineConns connections: each call queues its
	// encoded request, everything queued goes out in one write, and replies are matched to
	// requests in order by seqid. A request still queued when its attempt ends was never
	// sent (Attempt.Sent false); one written and not answered is in doubt (rule B2). A call
	// with no other in flight to its node takes a pooled connection. Off, each call borrows
	// a connection of the pool for itself (PoolSize). Pipelining needs the built-in dialer:
	// with WithDialer the pool is used.
	Pipelining bool
	// PipelineConns is the most pipelined connections per node the calls share (>= 1).
	// Default DefaultPipelineConns. Calls share the connections open until each carries 8
	// calls queued or in flight; the next call then opens another, up to PipelineConns.
	PipelineConns int
	// Service is the generated service the engine speaks (see Service); runtime.Dial needs
	// it, and the generated zarisclient.Dial sets it.
	Service *Service
	// Dialer opens connections to nodes. Nil (the default) means the built-in dialer
	// (DefaultDialer), which speaks Protocol over Transport, with TLS when TLS is set.
	Dialer Dialer
	// CallMiddleware runs once per call, in front of the deadline and retry layers, and
	// sees the call's final outcome. The first listed is the outermost.
	CallMiddleware []Middleware
	// AttemptMiddleware runs once per attempt, between the classify layer and the
	// transport, and sees the transport's raw outcome. The first listed is the outermost.
	AttemptMiddleware []Middleware
	// RetryBudget, when set, charges every call to it (rule B3). Nil: retries are bounded
	// by rule R4 only.
	RetryBudget RetryBudget
	// Classifiers, when set, replace the default classifier chain
	// (middleware.DefaultClassifiers).
	Classifiers []Classifier

	// requestLimit, set by Dial, is the engine's current map's MaxMessageBytes, which the
	// built-in dialer's connections hold requests to (0: the map says none): every
	// pipelined one, and pooled framed binary and compact ones (see clustermap.Map).
	requestLimit *atomic.Int64
	// idleCheckAfter is how long a pooled connection of the built-in dialer may sit idle
	// before the pool checks, when lending it, that the node has not closed it meanwhile:
	// zero means defaultIdleCheckAfter, negative means at every lend.
	idleCheckAfter time.Duration
	// pipelineEveryCall sends every call over a pipelined connection, even one with no
	// other call in flight to its node, which otherwise takes a pooled connection.
	pipelineEveryCall bool
}

// idleCheck is how long a connection of the built-in dialer may sit idle before the pool
// checks it when lending it (Config.idleCheckAfter; 0: at every lend).
func (cfg *Config) idleCheck() time.Duration {
	switch {
	case cfg.idleCheckAfter == 0:
		return defaultIdleCheckAfter
	case cfg.idleCheckAfter < 0:
		return 0
	}
	return cfg.idleCheckAfter
}

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
	// DefaultPipelineConns is the default cap of pipelined connections per node
	// (tools/zarisbench/README.md has the measurements).
	DefaultPipelineConns = 2
)

// configBuilder is the state NewConfig threads through the options.
type configBuilder struct {
	cfg            Config
	disableRetries bool // WithRetriesDisabled was given
	errs           []error
}

func (b *configBuilder) fail(field, value, reason string) {
	b.errs = append(b.errs, &ConfigError{Field: field, Value: value, Reason: reason})
}

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

// NewConfig builds a validated Config: the defaults (DefaultRetryPolicy and the Default
// constants; pipelining on), then the environment (read through os.LookupEnv unless
// WithEnv says otherwise), then opts in order, then validation, then rule R7. The error,
// if any, joins one *ConfigError per problem; a variable that does not parse is one that
// names the variable and the value, never a silent default. The variables:
//
//   - ZARIS_REQUEST_TIMEOUT bounds a whole call (rule R4): a Go duration ("90s",
//     "1m30s"), a whole number of seconds ("60"), or "infinite" for no bound.
//   - ZARIS_DISABLE_RETRIES, when true (strconv.ParseBool), makes every call a single
//     attempt, whatever else is configured (rule R7).
//   - ZARIS_CLIENT_MAP_REFRESH_WAIT_MS is the longest a caller waits for a shared map
//     refresh, in whole milliseconds (rule R6).
//   - ZARIS_PIPELINE, when false (strconv.ParseBool), turns pipelined connections off, so
//     every call takes a pooled connection; true turns them on. An option beats it.
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
		Clock:           clock.System,
		Pipelining:      true,
		PipelineConns:   DefaultPipelineConns,
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

// validate appends a *ConfigError for every field that makes no sense.
func (b *configBuilder) validate() {
	b.validateSeeds()
	b.validateWire()
	b.validateNumbers()
	b.validateHooks()
	b.validatePipeline()
}

// validateSeeds refuses an empty seed list and every seed that is not a host:port address.
func (b *configBuilder) validateSeeds() {
	if len(b.cfg.Seeds) == 0 {
		b.fail("Seeds", "[]", "at least one seed address is required")
	}
	for _, s := range b.cfg.Seeds {
		if err := seedAddrError(s); err != nil {
			b.fail("Seeds", strconv.Quote(s), "not a host:port address: "+err.Error())
		}
	}
}

// seedAddrError says why s is not a host:port address with a host and a port of 1..65535
// and no space, or is nil when it is one.
func seedAddrError(s string) error {
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
	return err
}

// validateWire refuses a protocol or a transport the client does not know.
func (b *configBuilder) validateWire() {
	c := &b.cfg
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
}

// validateNumbers refuses sizes, counts and durations out of their ranges: a pool or an
// attempt count below 1, a timeout of the dial or of an attempt that is not positive, and
// any other duration or the slow factor below zero.
func (b *configBuilder) validateNumbers() {
	c := &b.cfg
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
	notNegative("Retry.OwnerWait", c.Retry.OwnerWait)
	notNegative("RefreshWait", c.RefreshWait)
	notNegative("RefreshDebounce", c.RefreshDebounce)
	if c.Retry.MaxAttempts < 1 {
		b.fail("Retry.MaxAttempts", strconv.Itoa(c.Retry.MaxAttempts), "must be at least 1")
	}
	if c.Retry.SlowFactor < 0 {
		b.fail("Retry.SlowFactor", strconv.Itoa(c.Retry.SlowFactor), "must not be negative")
	}
}

// validateHooks refuses a nil clock and a nil classifier.
func (b *configBuilder) validateHooks() {
	if b.cfg.Clock == nil {
		b.fail("Clock", "nil", "a clock is required")
	}
	for i, cl := range b.cfg.Classifiers {
		if cl == nil {
			b.fail("Classifiers", fmt.Sprintf("[%d] nil", i), "a classifier must not be nil")
		}
	}
}

func (b *configBuilder) validatePipeline() {
	if n := b.cfg.PipelineConns; n < 1 {
		b.fail("PipelineConns", strconv.Itoa(n), "must be at least 1")
	}
}
