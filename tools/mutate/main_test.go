package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sampleLog = `Starting...
Gathering coverage... done in 9.1s
      KILLED CONDITIONALS_NEGATION at retry.go:20:30
   TIMED OUT CONDITIONALS_BOUNDARY at backoff.go:18:7
       LIVED ARITHMETIC_BASE at backoff.go:30:12
       LIVED CONDITIONALS_NEGATION at zarisslog/zarisslog.go:108:13
 NOT COVERED CONDITIONALS_NEGATION at stop.go:9:5
  NOT VIABLE INVERT_NEGATIVES at batch.go:1:1
Mutator coverage: 85.38%
`

// The score counts timed-out mutants as killed, a mutant in code no test runs as a
// survivor, and leaves listed equivalents out; it names each survivor, covered or not, and
// each stale entry.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	logFile := filepath.Join(dir, "mw.log")
	require.NoError(t, os.WriteFile(logFile, []byte(sampleLog), 0o644))
	eqFile := filepath.Join(dir, "equivalent.txt")
	require.NoError(t, os.WriteFile(eqFile, []byte(`# comment

middleware/backoff.go:30:12 ARITHMETIC_BASE the product is clamped to the cap either way
middleware/gone.go:1:1 ARITHMETIC_BASE a line that moved
runtime/pipeline.go:1:1 ARITHMETIC_BASE another tree, not run
`), 0o644))
	var out strings.Builder
	err := run(&out, eqFile, 50, blindOptions{}, []string{"middleware=" + logFile})
	require.NoError(t, err, out.String())
	text := out.String()
	assert.Contains(t, text, "middleware    50.0%  killed 2 (1 by a timeout) of 4 non-equivalent; lived 1, not covered 1; equivalent 1")
	assert.Contains(t, text, "total         50.0%  killed 2 of 4 non-equivalent mutants, 1 of them in code no test runs")
	assert.Contains(t, text, "survived: middleware/zarisslog/zarisslog.go:108:13 CONDITIONALS_NEGATION (lived)")
	assert.Contains(t, text, "survived: middleware/stop.go:9:5 CONDITIONALS_NEGATION (not covered)")
	assert.NotContains(t, text, "backoff.go:30:12")
	assert.Contains(t, text, "stale equivalent entry (no such survivor in this run): middleware/gone.go:1:1 ARITHMETIC_BASE")
	assert.NotContains(t, text, "runtime/pipeline.go")

	require.Error(t, run(&out, eqFile, 51, blindOptions{}, []string{"middleware=" + logFile}), "below -min")
}
