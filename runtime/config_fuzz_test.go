package runtime_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/clustron/zaris-go/runtime"
)

// FuzzNewConfigEnv feeds arbitrary values of the environment variables and a seed address
// to NewConfig. It must never panic; a value it rejects is a *runtime.ConfigError naming the
// variable (or the field) and the value; a configuration it accepts is valid: no negative
// duration, the seed kept as given, and ZARIS_DISABLE_RETRIES=true meaning one attempt
// (rule R7). Fuzz for longer with
//
//	go test -run '^$' -fuzz '^FuzzNewConfigEnv$' -fuzztime 30s ./runtime
func FuzzNewConfigEnv(f *testing.F) {
	f.Add("60", "false", "15000", "127.0.0.1:7000")
	f.Fuzz(func(t *testing.T, timeout, disable, waitMS, seed string) {
		env := map[string]string{
			"ZARIS_REQUEST_TIMEOUT":            timeout,
			"ZARIS_DISABLE_RETRIES":            disable,
			"ZARIS_CLIENT_MAP_REFRESH_WAIT_MS": waitMS,
		}
		lookup := func(name string) (string, bool) {
			v, ok := env[name]
			return v, ok
		}
		cfg, err := runtime.NewConfig(runtime.WithSeeds(seed), runtime.WithEnv(lookup))
		if err != nil {
			var joined interface{ Unwrap() []error }
			if !errors.As(err, &joined) {
				t.Fatalf("NewConfig returned %T, not joined *ConfigErrors: %v", err, err)
			}
			for _, e := range joined.Unwrap() {
				var ce *runtime.ConfigError
				if !errors.As(e, &ce) {
					t.Fatalf("not a *runtime.ConfigError: %T %v", e, e)
				}
				if ce.Var != "" && !strings.Contains(ce.Error(), ce.Var) {
					t.Fatalf("the error does not name the variable %s: %v", ce.Var, ce)
				}
				if ce.Var != "" && env[ce.Var] == "" {
					t.Fatalf("an empty %s was rejected: %v", ce.Var, ce)
				}
			}
			return
		}
		if len(cfg.Seeds) != 1 || cfg.Seeds[0] != seed {
			t.Fatalf("seeds %q, want [%q]", cfg.Seeds, seed)
		}
		if cfg.Retry.RequestTimeout < 0 || cfg.RefreshWait < 0 {
			t.Fatalf("a negative duration was accepted: request timeout %v, refresh wait %v",
				cfg.Retry.RequestTimeout, cfg.RefreshWait)
		}
		if on, perr := strconv.ParseBool(strings.TrimSpace(disable)); perr == nil && on {
			if cfg.Retry.MaxAttempts != 1 || !cfg.Retry.Disabled {
				t.Fatalf("ZARIS_DISABLE_RETRIES=%q left %d attempts", disable, cfg.Retry.MaxAttempts)
			}
		}
		if strings.EqualFold(strings.TrimSpace(timeout), "infinite") && cfg.Retry.RequestTimeout != 0 {
			t.Fatalf("ZARIS_REQUEST_TIMEOUT=infinite gave a bound of %v", cfg.Retry.RequestTimeout)
		}
	})
}
