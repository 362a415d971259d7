package runtime

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ZARIS_REQUEST_TIMEOUT takes whole seconds up to the longest time.Duration (9223372036 s)
// and any positive Go duration: "0s" is refused like "0" (no bound is "infinite").
func TestNewConfig_RequestTimeoutEnvBounds(t *testing.T) {
	cfg, err := NewConfig(WithSeeds("a:1"), WithEnv(env(map[string]string{envRequestTimeout: "9223372036"})))
	require.NoError(t, err)
	assert.Equal(t, 9223372036*time.Second, cfg.Retry.RequestTimeout)
	for _, v := range []string{"9223372037", "0s"} {
		_, err := NewConfig(WithSeeds("a:1"), WithEnv(env(map[string]string{envRequestTimeout: v})))
		ce, ok := errors.AsType[*ConfigError](err)
		require.True(t, ok, "%q: %v", v, err)
		assert.Equal(t, envRequestTimeout, ce.Var)
	}
}
