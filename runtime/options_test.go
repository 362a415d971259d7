package runtime

import (
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/runtime/clock"
)

// env returns a lookup over vars, for WithEnv.
func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

func TestNewConfigDefaults(t *testing.T) {
	cfg, err := NewConfig(WithSeeds("127.0.0.1:7000"), WithEnv(env(nil)))
	require.NoError(t, err)
	assert.Equal(t, []string{"127.0.0.1:7000"}, cfg.Seeds)
	assert.Equal(t, ProtocolBinary, cfg.Protocol)
	assert.Equal(t, TransportFramed, cfg.Transport)
	assert.Nil(t, cfg.TLS)
	assert.Equal(t, 16, cfg.PoolSize)
	assert.Equal(t, time.Second, cfg.DialTimeout)
	assert.Equal(t, 5*time.Second, cfg.AttemptTimeout)
	assert.Equal(t, DefaultRetryPolicy, cfg.Retry)
	assert.Equal(t, 3, cfg.Retry.MaxAttempts)
	assert.Equal(t, 100*time.Millisecond, cfg.Retry.Backoff)
	assert.Equal(t, 60*time.Second, cfg.Retry.RequestTimeout)
	assert.Equal(t, 15*time.Second, cfg.RefreshWait)
	assert.Equal(t, 500*time.Millisecond, cfg.RefreshDebounce)
	assert.Equal(t, clock.System, cfg.Clock)
	assert.Nil(t, cfg.Dialer)
}

func TestNewConfigOptions(t *testing.T) {
	clock := newFakeClock()
	tlsCfg := &tls.Config{ServerName: "x"}
	dialer := Dialer(nil)
	cfg, err := NewConfig(WithEnv(env(nil)),
		WithSeeds("a:1", "b:2"),
		WithProtocol(ProtocolCompact),
		WithTransport(TransportBuffered),
		WithTLS(tlsCfg),
		WithPoolSize(4),
		WithDialTimeout(2*time.Second),
		WithAttemptTimeout(3*time.Second),
		WithDefaultMaxAttempts(5),
		WithBackoff(50*time.Millisecond),
		WithRequestTimeout(9*time.Second),
		WithRefreshWait(7*time.Second),
		WithRefreshDebounce(time.Second),
		WithClock(clock),
		WithDialer(dialer),
	)
	require.NoError(t, err)
	assert.Equal(t, []string{"a:1", "b:2"}, cfg.Seeds)
	assert.Equal(t, ProtocolCompact, cfg.Protocol)
	assert.Equal(t, TransportBuffered, cfg.Transport)
	assert.Same(t, tlsCfg, cfg.TLS)
	assert.Equal(t, 4, cfg.PoolSize)
	assert.Equal(t, 2*time.Second, cfg.DialTimeout)
	assert.Equal(t, 3*time.Second, cfg.AttemptTimeout)
	assert.Equal(t, 5, cfg.Retry.MaxAttempts)
	assert.Equal(t, 50*time.Millisecond, cfg.Retry.Backoff)
	assert.Equal(t, 9*time.Second, cfg.Retry.RequestTimeout)
	assert.Equal(t, 7*time.Second, cfg.RefreshWait)
	assert.Equal(t, time.Second, cfg.RefreshDebounce)
	assert.Same(t, clock, cfg.Clock)
	assert.False(t, cfg.Retry.Disabled)

	// WithTimeout, a CallOption, is also a client-wide Option; later options win.
	cfg, err = NewConfig(WithEnv(env(nil)), WithSeeds("a:1"), WithRequestTimeout(4*time.Second), WithoutRequestTimeout())
	require.NoError(t, err)
	assert.Zero(t, cfg.Retry.RequestTimeout)
	cfg, err = NewConfig(WithEnv(env(nil)), WithSeeds("a:1"), WithoutRequestTimeout(), WithRequestTimeout(4*time.Second))
	require.NoError(t, err)
	assert.Equal(t, 4*time.Second, cfg.Retry.RequestTimeout)
}

// TestNewConfigEnv covers every variable with good and bad values and the precedence
// default < env < explicit option.
func TestNewConfigEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		opts    []Option
		check   func(t *testing.T, cfg Config)
		wantVar string // a *ConfigError for this variable is expected
	}{
		{name: "timeout duration", env: map[string]string{envRequestTimeout: "90s"},
			check: func(t *testing.T, c Config) { assert.Equal(t, 90*time.Second, c.Retry.RequestTimeout) }},
		{name: "timeout compound duration", env: map[string]string{envRequestTimeout: "1m30s"},
			check: func(t *testing.T, c Config) { assert.Equal(t, 90*time.Second, c.Retry.RequestTimeout) }},
		{name: "timeout whole seconds", env: map[string]string{envRequestTimeout: "60"},
			check: func(t *testing.T, c Config) { assert.Equal(t, 60*time.Second, c.Retry.RequestTimeout) }},
		{name: "timeout infinite", env: map[string]string{envRequestTimeout: "infinite"},
			check: func(t *testing.T, c Config) { assert.Zero(t, c.Retry.RequestTimeout) }},
		{name: "timeout INFINITE", env: map[string]string{envRequestTimeout: " INFINITE "},
			check: func(t *testing.T, c Config) { assert.Zero(t, c.Retry.RequestTimeout) }},
		{name: "timeout empty is unset", env: map[string]string{envRequestTimeout: ""},
			check: func(t *testing.T, c Config) { assert.Equal(t, 60*time.Second, c.Retry.RequestTimeout) }},
		{name: "timeout garbage", env: map[string]string{envRequestTimeout: "soon"}, wantVar: envRequestTimeout},
		{name: "timeout fraction of seconds", env: map[string]string{envRequestTimeout: "1.5"}, wantVar: envRequestTimeout},
		{name: "timeout zero", env: map[string]string{envRequestTimeout: "0"}, wantVar: envRequestTimeout},
		{name: "timeout negative", env: map[string]string{envRequestTimeout: "-5s"}, wantVar: envRequestTimeout},
		{name: "timeout option beats env", env: map[string]string{envRequestTimeout: "90s"},
			opts:  []Option{WithRequestTimeout(time.Second)},
			check: func(t *testing.T, c Config) { assert.Equal(t, time.Second, c.Retry.RequestTimeout) }},
		{name: "timeout without option beats env", env: map[string]string{envRequestTimeout: "90s"},
			opts:  []Option{WithoutRequestTimeout()},
			check: func(t *testing.T, c Config) { assert.Zero(t, c.Retry.RequestTimeout) }},

		{name: "disable true", env: map[string]string{envDisableRetries: "true"},
			check: func(t *testing.T, c Config) {
				assert.True(t, c.Retry.Disabled)
				assert.Equal(t, 1, c.Retry.MaxAttempts)
			}},
		{name: "disable 1", env: map[string]string{envDisableRetries: "1"},
			check: func(t *testing.T, c Config) { assert.True(t, c.Retry.Disabled) }},
		{name: "disable false", env: map[string]string{envDisableRetries: "false"},
			check: func(t *testing.T, c Config) {
				assert.False(t, c.Retry.Disabled)
				assert.Equal(t, 3, c.Retry.MaxAttempts)
			}},
		{name: "disable garbage", env: map[string]string{envDisableRetries: "yes please"}, wantVar: envDisableRetries},
		{name: "R7 env true wins over an explicit max attempts", env: map[string]string{envDisableRetries: "TRUE"},
			opts: []Option{WithDefaultMaxAttempts(7)},
			check: func(t *testing.T, c Config) {
				assert.True(t, c.Retry.Disabled)
				assert.Equal(t, 1, c.Retry.MaxAttempts)
			}},
		{name: "R7 option disables with env false", env: map[string]string{envDisableRetries: "false"},
			opts: []Option{WithRetriesDisabled(), WithDefaultMaxAttempts(7)},
			check: func(t *testing.T, c Config) {
				assert.True(t, c.Retry.Disabled)
				assert.Equal(t, 1, c.Retry.MaxAttempts)
			}},

		{name: "wait ms", env: map[string]string{envRefreshWaitMS: "2500"},
			check: func(t *testing.T, c Config) { assert.Equal(t, 2500*time.Millisecond, c.RefreshWait) }},
		{name: "wait zero", env: map[string]string{envRefreshWaitMS: "0"},
			check: func(t *testing.T, c Config) { assert.Zero(t, c.RefreshWait) }},
		{name: "wait duration is not ms", env: map[string]string{envRefreshWaitMS: "15s"}, wantVar: envRefreshWaitMS},
		{name: "wait negative", env: map[string]string{envRefreshWaitMS: "-1"}, wantVar: envRefreshWaitMS},
		{name: "wait longest", env: map[string]string{envRefreshWaitMS: "9223372036854"}, // math.MaxInt64 ns in whole ms
			check: func(t *testing.T, c Config) { assert.Equal(t, 9223372036854*time.Millisecond, c.RefreshWait) }},
		{name: "wait too long", env: map[string]string{envRefreshWaitMS: "9223372036855"}, wantVar: envRefreshWaitMS},
		{name: "wait option beats env", env: map[string]string{envRefreshWaitMS: "2500"},
			opts:  []Option{WithRefreshWait(time.Second)},
			check: func(t *testing.T, c Config) { assert.Equal(t, time.Second, c.RefreshWait) }},

		{name: "all three", env: map[string]string{envRequestTimeout: "5", envDisableRetries: "f", envRefreshWaitMS: "10"},
			check: func(t *testing.T, c Config) {
				assert.Equal(t, 5*time.Second, c.Retry.RequestTimeout)
				assert.False(t, c.Retry.Disabled)
				assert.Equal(t, 10*time.Millisecond, c.RefreshWait)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := append([]Option{WithSeeds("a:1"), WithEnv(env(tc.env))}, tc.opts...)
			cfg, err := NewConfig(opts...)
			if tc.wantVar != "" {
				require.Error(t, err)
				var ce *ConfigError
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, tc.wantVar, ce.Var)
				assert.Equal(t, tc.env[tc.wantVar], ce.Value)
				assert.Contains(t, err.Error(), tc.wantVar)
				assert.Contains(t, err.Error(), tc.env[tc.wantVar])
				return
			}
			require.NoError(t, err)
			tc.check(t, cfg)
		})
	}
}

func TestNewConfigReadsProcessEnv(t *testing.T) {
	t.Setenv(envRequestTimeout, "42")
	cfg, err := NewConfig(WithSeeds("a:1"))
	require.NoError(t, err)
	assert.Equal(t, 42*time.Second, cfg.Retry.RequestTimeout)

	// A nil lookup ignores the environment.
	cfg, err = NewConfig(WithSeeds("a:1"), WithEnv(nil))
	require.NoError(t, err)
	assert.Equal(t, 60*time.Second, cfg.Retry.RequestTimeout)
}

func TestNewConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []Option
		field string
	}{
		{"no seeds", nil, "Seeds"},
		{"empty seeds", []Option{WithSeeds()}, "Seeds"},
		{"seed without port", []Option{WithSeeds("localhost")}, "Seeds"},
		{"seed without host", []Option{WithSeeds(":7000")}, "Seeds"},
		{"seed bad port", []Option{WithSeeds("h:99999")}, "Seeds"},
		{"seed with a space", []Option{WithSeeds("127.0.0.1:7001", " 127.0.0.1:7002")}, "Seeds"},
		{"seed with a trailing space", []Option{WithSeeds("127.0.0.1:7002 ")}, "Seeds"},
		{"unknown protocol", []Option{WithProtocol("xml")}, "Protocol"},
		{"unknown transport", []Option{WithTransport("carrier-pigeon")}, "Transport"},
		{"pool size zero", []Option{WithPoolSize(0)}, "PoolSize"},
		{"dial timeout zero", []Option{WithDialTimeout(0)}, "DialTimeout"},
		{"attempt timeout negative", []Option{WithAttemptTimeout(-time.Second)}, "AttemptTimeout"},
		{"backoff negative", []Option{WithBackoff(-time.Millisecond)}, "Retry.Backoff"},
		{"max attempts zero", []Option{WithDefaultMaxAttempts(0)}, "Retry.MaxAttempts"},
		{"request timeout zero", []Option{WithRequestTimeout(0)}, "Retry.RequestTimeout"},
		{"call timeout as option zero", []Option{WithRequestTimeout(0)}, "Retry.RequestTimeout"},
		{"refresh wait negative", []Option{WithRefreshWait(-1)}, "RefreshWait"},
		{"refresh debounce negative", []Option{WithRefreshDebounce(-1)}, "RefreshDebounce"},
		{"nil clock", []Option{WithClock(nil)}, "Clock"},
		{"nil classifier", []Option{WithClassifiers(nil)}, "Classifiers"},
		{"nil classifier among others", []Option{WithClassifiers(func(Outcome) (Class, bool) { return Answer, true }, nil)}, "Classifiers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := []Option{WithEnv(env(nil))}
			if tc.field != "Seeds" {
				opts = append(opts, WithSeeds("a:1"))
			}
			_, err := NewConfig(append(opts, tc.opts...)...)
			require.Error(t, err)
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.field, ce.Field)
			assert.Empty(t, ce.Var)
			assert.Contains(t, err.Error(), tc.field)
		})
	}
}

func TestNewConfigReportsEveryProblem(t *testing.T) {
	_, err := NewConfig(WithEnv(env(map[string]string{envRefreshWaitMS: "x"})), WithPoolSize(0))
	require.Error(t, err)
	var fields []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var ce *ConfigError
		require.True(t, errors.As(e, &ce))
		fields = append(fields, ce.Field)
	}
	assert.ElementsMatch(t, []string{"RefreshWait", "Seeds", "PoolSize"}, fields)
}

// A per-call option is not a client option: WithMaxAttempts and WithTimeout cannot be
// passed to NewConfig or Dial, whose counterparts are WithDefaultMaxAttempts and
// WithRequestTimeout.
func TestCallOptionIsNotAnOption(t *testing.T) {
	_, isOption := any(WithMaxAttempts(5)).(Option)
	assert.False(t, isOption)
	_, isOption = any(WithTimeout(time.Second)).(Option)
	assert.False(t, isOption)
}

// The stack options land in the Config the default stack is built from; repeated
// middleware options append, classifiers replace.
func TestStackOptions(t *testing.T) {
	mw := func(next Handler) Handler { return next }
	cls := func(Outcome) (Class, bool) { return Answer, true }
	budget := countingBudget{}
	cfg, err := NewConfig(WithEnv(nil), WithSeeds("127.0.0.1:1"),
		WithCallMiddleware(mw), WithCallMiddleware(mw, mw),
		WithAttemptMiddleware(mw),
		WithClassifiers(cls, cls), WithClassifiers(cls),
		WithRetryBudget(budget),
		WithDefaultMaxAttempts(7))
	require.NoError(t, err)
	assert.Len(t, cfg.CallMiddleware, 3)
	assert.Len(t, cfg.AttemptMiddleware, 1)
	assert.Len(t, cfg.Classifiers, 1)
	assert.Equal(t, budget, cfg.RetryBudget)
	assert.Equal(t, 7, cfg.Retry.MaxAttempts)

	_, err = NewConfig(WithEnv(nil), WithSeeds("127.0.0.1:1"), WithDefaultMaxAttempts(0))
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "Retry.MaxAttempts", ce.Field)
}

// WithRetryPolicy sets every number at once; Disabled acts as WithRetriesDisabled.
func TestWithRetryPolicy(t *testing.T) {
	p := DefaultRetryPolicy
	p.MaxAttempts, p.Backoff, p.SlowFactor = 4, time.Second, 2
	cfg, err := NewConfig(WithEnv(nil), WithSeeds("127.0.0.1:1"), WithRetryPolicy(p))
	require.NoError(t, err)
	assert.Equal(t, p, cfg.Retry)

	p.Disabled = true
	cfg, err = NewConfig(WithEnv(nil), WithSeeds("127.0.0.1:1"), WithRetryPolicy(p))
	require.NoError(t, err)
	assert.Equal(t, 1, cfg.Retry.MaxAttempts)
	assert.True(t, cfg.Retry.Disabled)
}

type countingBudget struct{}

func (countingBudget) Deposit()       {}
func (countingBudget) Withdraw() bool { return true }
