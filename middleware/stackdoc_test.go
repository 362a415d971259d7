package middleware

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/clustron/zaris-go/middleware/middlewaretest"
	"github.com/clustron/zaris-go/runtime"
)

// diagramLine is a line of the default stack's diagram in doc.go: a tab, an indent for an
// attempt-level layer, the layer's name, and its description after two spaces or more.
var diagramLine = regexp.MustCompile(`^//\t( {4})?(\S+(?: \S+)*)(?: {2,}.*)?$`)

// diagram reads the package doc's drawing of the default stack: the call-level layers and
// the attempt-level ones, outermost first, and the last line, the transport.
func diagram(t *testing.T) (call, attempt []string, bottom string) {
	t.Helper()
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(doc), "// # The default stack\n")
	require.True(t, ok, "doc.go has no section The default stack")
	var lines []string
	for _, line := range strings.Split(section, "\n") {
		if strings.HasPrefix(line, "//\t") {
			lines = append(lines, line)
		} else if len(lines) > 0 {
			break
		}
	}
	require.NotEmpty(t, lines, "the section has no diagram")
	for _, line := range lines[:len(lines)-1] {
		m := diagramLine.FindStringSubmatch(line)
		require.NotNil(t, m, "a diagram line: %q", line)
		if m[1] != "" {
			attempt = append(attempt, m[2])
		} else {
			call = append(call, m[2])
		}
	}
	m := diagramLine.FindStringSubmatch(lines[len(lines)-1])
	require.NotNil(t, m)
	return call, attempt, m[2]
}

func layerNames(ls []layer) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.name)
	}
	return out
}

// The diagram of the default stack in the package doc is the order layers builds, with
// every optional layer configured: an edit of either without the other fails here.
func TestDefaultStackDiagramIsTheOrderBuilt(t *testing.T) {
	call, attempt, bottom := diagram(t)
	pass := func(next Handler) Handler { return next }
	cfg := runtime.Config{Retry: runtime.DefaultRetryPolicy, Clock: middlewaretest.NewClock(),
		RetryBudget:    unlimited{},
		CallMiddleware: []Middleware{pass}, AttemptMiddleware: []Middleware{pass}}
	gotCall, gotAttempt := layers(cfg, cfg.Clock, middlewaretest.NewRefresher(1))
	assert.Equal(t, call, layerNames(gotCall), "the call-level layers")
	assert.Equal(t, attempt, layerNames(gotAttempt), "the attempt-level layers, run by Retry")
	assert.Equal(t, "Retry", call[len(call)-1], "Retry runs the attempt-level layers, so it is the last call-level one")
	assert.Equal(t, "transport", bottom)
	for _, l := range append(gotCall, gotAttempt...) {
		assert.NotNil(t, l.mw, "layer %s is configured", l.name)
	}
	// The stack runs: an answer goes through every layer once.
	transport := middlewaretest.Script(middlewaretest.Answer(runtime.Status(0)))
	_, err := Default(transport.Invoke, middlewaretest.NewRefresher(1), cfg)(context.Background(), runtime.NewCall(
		&runtime.Op{Name: "Get", Statuses: runtime.NewStatusTable("S", nil, []runtime.StatusInfo{{Value: 0, Name: "Ok", Class: runtime.Answer}}),
			Status: func(r runtime.Response) runtime.Status { return r.(*middlewaretest.Response).Status }},
		[]byte("k"), nil, false))
	require.NoError(t, err)
	assert.Equal(t, 1, transport.Attempts())
}

// unlimited is a retry budget that never runs out.
type unlimited struct{}

func (unlimited) Deposit()       {}
func (unlimited) Withdraw() bool { return true }
