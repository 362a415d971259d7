package runtime

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A seed's port may be any of 1..65535, the last included.
func TestNewConfig_SeedPort65535(t *testing.T) {
	cfg, err := NewConfig(WithSeeds("a:65535"), WithEnv(env(nil)))
	require.NoError(t, err)
	assert.Equal(t, []string{"a:65535"}, cfg.Seeds)
}

// One attempt per call (no retries) is a valid Retry.MaxAttempts.
func TestNewConfig_OneMaxAttempt(t *testing.T) {
	cfg, err := NewConfig(WithSeeds("a:1"), WithEnv(env(nil)), WithDefaultMaxAttempts(1))
	require.NoError(t, err)
	assert.Equal(t, 1, cfg.Retry.MaxAttempts)
	assert.False(t, cfg.Retry.Disabled)
}
