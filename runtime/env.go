package runtime

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// The environment variables a client reads when it is built; NewConfig's doc says what
// each means.
const (
	// envRequestTimeout bounds a whole call (rule R4): a Go duration ("90s", "1m30s"), a
	// whole number of seconds ("60"), or "infinite" for no bound.
	envRequestTimeout = "ZARIS_REQUEST_TIMEOUT"
	// envDisableRetries, when true (strconv.ParseBool), makes every call a single attempt,
	// whatever else is configured (rule R7).
	envDisableRetries = "ZARIS_DISABLE_RETRIES"
	// envRefreshWaitMS is the longest a caller waits for a shared map refresh, in whole
	// milliseconds (rule R6).
	envRefreshWaitMS = "ZARIS_CLIENT_MAP_REFRESH_WAIT_MS"
	// envPipeline, when false (strconv.ParseBool), turns pipelined connections off, so
	// every call takes a pooled connection; true turns them on. An option beats it.
	envPipeline = "ZARIS_PIPELINE"
)

// envOption carries WithEnv's lookup; NewConfig picks it out before reading the environment.
type envOption struct {
	lookup func(string) (string, bool)
}

func (envOption) applyOption(*configBuilder) {}

// applyEnv reads the environment into b.cfg and reports whether envDisableRetries is true.
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
	if v, ok := get(envRequestTimeout); ok {
		if d, err := parseRequestTimeout(v); err != nil {
			envErr("Retry.RequestTimeout", envRequestTimeout, v, err.Error())
		} else {
			b.cfg.Retry.RequestTimeout = d
		}
	}
	if v, ok := get(envDisableRetries); ok {
		if on, err := strconv.ParseBool(v); err != nil {
			envErr("Retry.Disabled", envDisableRetries, v, "not a boolean (true, false, 1, 0, ...)")
		} else {
			disable = on
		}
	}
	if v, ok := get(envRefreshWaitMS); ok {
		ms, err := strconv.ParseInt(v, 10, 64)
		switch {
		case err != nil:
			envErr("RefreshWait", envRefreshWaitMS, v, "not a whole number of milliseconds")
		case ms < 0:
			envErr("RefreshWait", envRefreshWaitMS, v, "must not be negative")
		case ms > math.MaxInt64/int64(time.Millisecond):
			envErr("RefreshWait", envRefreshWaitMS, v, "too large")
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

func (b *configBuilder) applyPipelineEnv(get func(string) (string, bool), envErr func(field, name, value, reason string)) {
	if v, ok := get(envPipeline); ok {
		if on, err := strconv.ParseBool(v); err != nil {
			envErr("Pipelining", envPipeline, v, "not a boolean (true, false, 1, 0, ...)")
		} else {
			b.cfg.Pipelining = on
		}
	}
}
