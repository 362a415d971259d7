package runtime

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The defaults a client starts from are the numbers the README's option table and the
// rules (middleware's package doc) give: a changed default fails here until the docs say it.
func TestDefaultsAreTheNumbersTheDocsGive(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	rules, err := os.ReadFile("../middleware/doc.go")
	require.NoError(t, err)
	cfg, err := NewConfig(WithSeeds("127.0.0.1:7001"), WithEnv(func(string) (string, bool) { return "", false }))
	require.NoError(t, err)
	on := map[bool]string{true: "on", false: "off"}
	for _, c := range []struct {
		doc  []byte
		text string
	}{
		{readme, fmt.Sprintf("connections per node [%d]", cfg.PoolSize)},
		{readme, fmt.Sprintf("one dial [%s]", spoken(cfg.DialTimeout))},
		{readme, fmt.Sprintf("one attempt on the wire [%s]", spoken(cfg.AttemptTimeout))},
		{readme, fmt.Sprintf("pipelined connections [%s]", on[cfg.Pipelining])},
		{readme, fmt.Sprintf("the most per node the calls share [%d]", cfg.PipelineConns)},
		{readme, fmt.Sprintf("attempts per call [%d]", cfg.Retry.MaxAttempts)},
		{readme, fmt.Sprintf("base backoff [%s]", spoken(cfg.Retry.Backoff))},
		{readme, fmt.Sprintf("the whole-call deadline [%s]", spoken(cfg.Retry.RequestTimeout))},
		{readme, fmt.Sprintf("longest wait for a shared map refresh [%s]", spoken(cfg.RefreshWait))},
		{readme, fmt.Sprintf("debounce window [%s]", spoken(cfg.RefreshDebounce))},
		{rules, fmt.Sprintf("capped at %s", spoken(cfg.Retry.MaxBackoff))},
		{rules, fmt.Sprintf("(at least %s, at most %s", spoken(silenceFloor), spoken(silenceCeiling))},
		{rules, fmt.Sprintf("ZARIS_CLIENT_MAP_REFRESH_WAIT_MS (%d)", cfg.RefreshWait.Milliseconds())},
		{rules, fmt.Sprintf("RetryPolicy.OwnerWait (%s, the default attempt timeout)", spoken(cfg.Retry.OwnerWait))},
		{readme, fmt.Sprintf("a wait for a new owner [%s]", spoken(cfg.Retry.OwnerWait))},
	} {
		// A doc comment's text runs on across its lines' comment markers.
		assert.Contains(t, strings.Join(strings.Fields(strings.ReplaceAll(string(c.doc), "//", "")), " "), c.text)
	}
}

// spoken writes d the way the docs do: "100 ms", "5 s".
func spoken(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%d s", d/time.Second)
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}
