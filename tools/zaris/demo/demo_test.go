package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A short run with every churn kind once: nothing acknowledged is lost, no answer is
// misreported, the application sees no error during migration, join, failback and leave,
// and the report and the timeline hold every phase, series and event.
func TestShortRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster under churn for several seconds")
	}
	events, err := ParseSchedule("migrate@500ms,join@1500ms,kill@3s,failback@4500ms,leave@6s")
	require.NoError(t, err)
	out := t.TempDir()
	var progress bytes.Buffer
	report, err := Run(context.Background(), Config{
		Nodes: 3, Workers: 8, KeysPerWorker: 32, Duration: 7500 * time.Millisecond,
		Schedule: events, Out: out, Progress: &progress, ProgressEvery: time.Second,
	})
	require.NoError(t, err)
	var table bytes.Buffer
	report.WriteTable(&table)
	t.Log("\n" + table.String())

	assert.True(t, report.OK(), "lost %v, misreported %v, error %q", report.Verification.Lost, report.Verification.Misreported, report.Verification.Error)
	assert.Equal(t, 8*32, report.Verification.Keys)
	require.Len(t, report.Events, 5)
	for _, e := range report.Events {
		assert.Empty(t, e.Error, e.Label)
	}
	require.Len(t, report.Phases, 6)
	assert.Equal(t, "steady", report.Phases[0].Name)
	for _, p := range report.Phases {
		assert.Positive(t, p.Ops, p.Name)
		if !strings.HasPrefix(p.Name, "kill") {
			assert.Zero(t, p.ErrorCount, "%s: %v", p.Name, p.Errors)
		}
	}
	assert.Contains(t, progress.String(), "ops/s")

	data, err := os.ReadFile(filepath.Join(out, "report.json"))
	require.NoError(t, err)
	var decoded Report
	require.NoError(t, json.Unmarshal(data, &decoded))
	assert.Equal(t, report.Phases, decoded.Phases)

	html, err := os.Open(filepath.Join(out, "timeline.html"))
	require.NoError(t, err)
	defer html.Close()
	series, markers := scanTimeline(t, html)
	assert.Equal(t, []string{"ops", "p99"}, series)
	assert.Equal(t, []string{"migrate", "join", "kill", "failback", "leave"}, markers)
}

// scanTimeline parses the page as XML and returns the metric of each series and the kind of
// each event marker, in document order.
func scanTimeline(t *testing.T, r io.Reader) (series, markers []string) {
	t.Helper()
	dec := xml.NewDecoder(r)
	dec.Strict = true
	dec.AutoClose = xml.HTMLAutoClose
	dec.Entity = xml.HTMLEntity
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return series, markers
		}
		require.NoError(t, err, "timeline.html must parse")
		el, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		attr := func(name string) string {
			for _, a := range el.Attr {
				if a.Name.Local == name {
					return a.Value
				}
			}
			return ""
		}
		switch {
		case el.Name.Local == "polyline" && strings.Contains(attr("class"), "series"):
			series = append(series, attr("data-metric"))
			assert.NotEmpty(t, attr("points"))
		case el.Name.Local == "g" && attr("class") == "event":
			markers = append(markers, attr("data-event"))
		}
	}
}

func TestParseSchedule(t *testing.T) {
	events, err := ParseSchedule("kill@8s, failback:3@16s,migrate@1s")
	require.NoError(t, err)
	assert.Equal(t, []Event{{Kind: Migrate, At: time.Second}, {Kind: Kill, At: 8 * time.Second}, {Kind: Failback, At: 16 * time.Second, Node: 3}}, events)
	for in, want := range map[string]string{
		"kill":       "want kind@duration",
		"kill@soon":  `"soon" is not a duration`,
		"explode@1s": `unknown kind "explode"`,
		"kill:x@1s":  `node "x" is not a positive node id`,
		"kill:-1@1s": `node "-1"`,
		"leave@-1s":  "is not a duration",
	} {
		_, err := ParseSchedule(in)
		assert.ErrorContains(t, err, want, in)
	}
	d := DefaultConfig()
	assert.Len(t, d.Schedule, 5)
}

// An event that began after the workload's end has an empty phase; summarize does not
// panic on it.
func TestSummarizeEventAfterTheEnd(t *testing.T) {
	records := []record{{start: time.Second}, {start: 2 * time.Second}, {start: 4500 * time.Millisecond}}
	bounds := []phaseBound{{name: "steady"}, {name: "leave", start: 5 * time.Second}}
	phases, total, _ := summarize(records, bounds, 4*time.Second, 0)
	require.Len(t, phases, 2)
	assert.Equal(t, 3, phases[0].Ops)
	assert.Equal(t, 0, phases[1].Ops)
	assert.Equal(t, 3, total.Ops)
}
