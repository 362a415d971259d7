package runtime

import (
	"crypto/tls"
	"time"
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

// RetryPolicy holds the numbers of rules R4, R5 and R7. Its zero value is not useful; the
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
}

// DefaultRetryPolicy is the policy a client starts from before options and environment.
var DefaultRetryPolicy = RetryPolicy{
	MaxAttempts:    3,
	Backoff:        100 * time.Millisecond,
	MaxBackoff:     2 * time.Second,
	RequestTimeout: 60 * time.Second,
}

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
	// Clock is the source of time. Default SystemClock.
	Clock Clock
	// Pipeline selects pipelined connections, or the pool alone (see WithPipelining).
	// Default on, 2 connections per node.
	Pipeline Pipelining
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
}
