package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"maps"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
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
	assert.Equal(t, 8*countersPerWorker, report.Verification.Counters, "every counter read back")
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
	// Every fetch is one a call asked for or one made in the background (B1, B6, B7), in every
	// phase: calls share fetches, so they ask for more than they get.
	for _, p := range append(slices.Clone(report.Phases), report.Total) {
		assert.LessOrEqual(t, p.RefreshesPerformed, p.RefreshesRequested+p.RefreshesBackground,
			"%s: map fetches beyond the calls' requests and the background fetches", p.Name)
		assert.LessOrEqual(t, p.RefreshesBackground, p.RefreshesPerformed, p.Name)
	}
	assert.Contains(t, table.String(), "refreshes asked  map fetches  in background")
	assertProgressNamesPhases(t, progress.String(), report)
	assert.Positive(t, report.Total.Batches.MultiGets, "the workload makes MultiGet calls")
	assert.Positive(t, report.Total.Batches.MultiPuts, "the workload makes MultiPut calls")
	assert.Equal(t, batchSize*(report.Total.Batches.MultiGets+report.Total.Batches.MultiPuts), report.Total.Batches.Items)
	assert.Contains(t, table.String(), "MultiGet")
	assert.Contains(t, progress.String(), "ops/s")

	data, err := os.ReadFile(filepath.Join(out, "report.json"))
	require.NoError(t, err)
	var decoded Report
	require.NoError(t, json.Unmarshal(data, &decoded))
	assert.Equal(t, report.Phases, decoded.Phases)
	assert.Equal(t, report.Timeline, decoded.Timeline)
	assert.Positive(t, decoded.PeakRSSBytes)
	if goruntime.GOOS == "linux" {
		assert.Equal(t, "VmHWM", decoded.PeakRSSSource)
	}
	assert.Contains(t, table.String(), "peak RSS: ")

	// Retried attempts by cause: the phases sum to the total, the seconds hold every retry of
	// the calls that started in a whole second, and the churn caused some.
	causes := map[string]bool{}
	retries := map[string]int{}
	for _, p := range report.Phases {
		for c, n := range p.Retries {
			retries[c] += n
		}
	}
	assert.Equal(t, report.Total.Retries, retries)
	assert.NotEmpty(t, report.Total.Retries, "the churn caused no retried attempt")
	for _, s := range report.Timeline {
		for c, n := range s.Retries {
			causes[c] = true
			assert.LessOrEqual(t, n, report.Total.Retries[c], c)
		}
	}
	assert.NotEmpty(t, causes)

	html, err := os.Open(filepath.Join(out, "timeline.html"))
	require.NoError(t, err)
	defer html.Close()
	series, bands, markers := scanTimeline(t, html)
	assert.Equal(t, []string{"ops", "p99", "waiting"}, series)
	assert.ElementsMatch(t, slices.Collect(maps.Keys(causes)), bands, "one stacked band per cause in the timeline")
	assert.Equal(t, []string{"migrate", "join", "kill", "failback", "leave"}, markers)
}

// assertProgressNamesPhases checks that the progress lines name each phase as the report
// does: steady, or an event's label.
func assertProgressNamesPhases(t *testing.T, progress string, report *Report) {
	t.Helper()
	var names []string
	for _, p := range report.Phases {
		names = append(names, p.Name)
	}
	lines := 0
	for line := range strings.Lines(progress) {
		_, phase, ok := strings.Cut(strings.TrimSpace(line), "phase: ")
		if assert.True(t, ok, "a progress line names its phase: %q", line) {
			assert.Contains(t, names, phase, "the phase of %q is one of the report's", line)
			lines++
		}
	}
	assert.Positive(t, lines)
}

// scanTimeline parses the page as XML and returns the metric of each line series, the cause
// of each band of the stacked retries panel and the kind of each event marker, in document
// order.
func scanTimeline(t *testing.T, r io.Reader) (series, bands, markers []string) {
	t.Helper()
	dec := xml.NewDecoder(r)
	dec.Strict = true
	dec.AutoClose = xml.HTMLAutoClose
	dec.Entity = xml.HTMLEntity
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return series, bands, markers
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
		case el.Name.Local == "polygon" && attr("data-metric") == "retries":
			bands = append(bands, attr("data-cause"))
			assert.NotEmpty(t, attr("points"))
		case el.Name.Local == "g" && attr("class") == "event":
			markers = append(markers, attr("data-event"))
		}
	}
}

func TestParseSchedule(t *testing.T) {
	events, err := ParseSchedule("kill@8s, failback:3@16s,migrate@1s,stall:2@20s,lost-host:1@25s,lost-host@30s")
	require.NoError(t, err)
	assert.Equal(t, []Event{{Kind: Migrate, At: time.Second}, {Kind: Kill, At: 8 * time.Second}, {Kind: Failback, At: 16 * time.Second, Node: 3},
		{Kind: Stall, At: 20 * time.Second, Node: 2}, {Kind: LostHost, At: 25 * time.Second, Node: 1}, {Kind: LostHost, At: 30 * time.Second}}, events)
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
	assert.Len(t, d.Schedule, 8)
	var ks []Kind
	for _, e := range d.Schedule {
		if !slices.Contains(ks, e.Kind) {
			ks = append(ks, e.Kind)
		}
		assert.Less(t, e.At, d.Duration, "%s runs", e)
	}
	assert.ElementsMatch(t, kinds, ks, "the default schedule has every churn kind")
	assert.Equal(t, Failback, d.Schedule[len(d.Schedule)-1].Kind, "a failback follows the lost host")
}

// A lost host (a node that stops answering without refusing anything) stays lost until the
// store has failed it over and LostHostHold more, and is then replaced, so that a later
// failback hands its replacement the segments back: nothing acknowledged is lost, the
// application sees no error, and the report has the event's failover and the waits for a
// new owner (rule B7) per phase and in total.
func TestLostHost(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster through a failover of several seconds")
	}
	// The events run one after another: the failback starts once the lost host is replaced.
	events, err := ParseSchedule("lost-host@300ms,failback@1s")
	require.NoError(t, err)
	out := t.TempDir()
	var progress bytes.Buffer
	report, err := Run(context.Background(), Config{Nodes: 3, Workers: 4, KeysPerWorker: 16, Duration: 1500 * time.Millisecond,
		Schedule: events, Out: out, Progress: &progress, ProgressEvery: 500 * time.Millisecond})
	require.NoError(t, err)
	var table bytes.Buffer
	report.WriteTable(&table)
	t.Log("\n" + table.String())

	assert.True(t, report.OK(), "lost %v, misreported %v, error %q", report.Verification.Lost, report.Verification.Misreported, report.Verification.Error)
	require.Len(t, report.Events, 2)
	lost, back := report.Events[0], report.Events[1]
	assert.Empty(t, lost.Error)
	assert.Empty(t, back.Error, "the replaced host takes its segments back")
	assert.Equal(t, LostHost, lost.Kind)
	assert.Regexp(t, `^lost-host n\d$`, lost.Label)
	assert.Equal(t, "failback"+strings.TrimPrefix(lost.Label, "lost-host"), back.Label, "the failback targets the lost host")
	// The host is lost for seconds: the progress lines meanwhile name it as the table does
	// (they said "lost-host" until the event was over).
	assertProgressNamesPhases(t, progress.String(), report)
	assert.Contains(t, progress.String(), "phase: "+lost.Label)
	assert.Positive(t, lost.NewOwnerMs, "the store gave the lost host's segments to other nodes")
	assert.LessOrEqual(t, lost.NewOwnerMs, lost.FailoverMs)
	assert.GreaterOrEqual(t, lost.LostMs, lost.FailoverMs+ms(LostHostHold), "lost past the failover")
	assert.Contains(t, table.String(), "then replaced")
	assert.Contains(t, table.String(), "owner waits calls/max ms")
	assert.Contains(t, table.String(), "rule B7")

	require.Len(t, report.Phases, 3)
	calls, waits := 0, 0
	for _, p := range report.Phases {
		assert.Positive(t, p.Ops, p.Name)
		assert.Zero(t, p.ErrorCount, "%s: %v", p.Name, p.Errors)
		assert.LessOrEqual(t, p.OwnerWaitCalls, p.OwnerWaits, p.Name)
		assert.LessOrEqual(t, p.OwnerWaitMaxMs, report.Total.OwnerWaitMaxMs, p.Name)
		calls += p.OwnerWaitCalls
		waits += p.OwnerWaits
	}
	assert.Equal(t, calls, report.Total.OwnerWaitCalls)
	assert.Equal(t, waits, report.Total.OwnerWaits)

	data, err := os.ReadFile(filepath.Join(out, "report.json"))
	require.NoError(t, err)
	var decoded map[string]any
	require.NoError(t, json.Unmarshal(data, &decoded))
	total := decoded["total"].(map[string]any)
	for _, k := range []string{"ownerWaitCalls", "ownerWaits", "ownerWaitMaxMs"} {
		assert.Contains(t, total, k)
	}
	ev := decoded["events"].([]any)[0].(map[string]any)
	for _, k := range []string{"newOwnerMs", "failoverMs", "lostMs"} {
		assert.Contains(t, ev, k)
	}
}

// An event due after the workload ended does not start, even when its time has long passed
// (both the timer and the end are ready at once).
func TestSleepUntilAfterTheEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 100 {
		assert.False(t, sleepUntil(ctx, time.Now().Add(-time.Second)))
	}
	assert.True(t, sleepUntil(context.Background(), time.Now().Add(-time.Second)))
}

// Every scheduled event runs and gets workload of its own, even one due at the very end of
// the duration (as on a loaded machine, where events run late): the workload goes on past
// the duration until the last event had eventTail of it. Before, such an event either did
// not run or its phase had no operations.
func TestEveryEventGetsAPhase(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a cluster under churn")
	}
	d := 400 * time.Millisecond
	events, err := ParseSchedule("migrate@100ms,migrate@" + (d - time.Nanosecond).String())
	require.NoError(t, err)
	report, err := Run(context.Background(), Config{Nodes: 3, Workers: 2, KeysPerWorker: 4, Duration: d, Schedule: events})
	require.NoError(t, err)
	require.Len(t, report.Events, 2)
	require.Len(t, report.Phases, 3)
	for _, p := range report.Phases {
		assert.Positive(t, p.Ops, p.Name)
	}
	assert.True(t, report.OK(), "lost %v, misreported %v, error %q", report.Verification.Lost, report.Verification.Misreported, report.Verification.Error)
}

// The sample output in tools/zaris/README.md is a run of the default schedule: a row for
// the steady phase and each of its events, in order, and the total, under the header the
// table has today.
func TestReadmeSampleHasEveryPhase(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	_, demo, ok := strings.Cut(string(data), "## The demo")
	require.True(t, ok)
	_, sample, ok := strings.Cut(demo, "```\n")
	require.True(t, ok)
	sample, _, ok = strings.Cut(sample, "```")
	require.True(t, ok)

	var empty bytes.Buffer
	(&Report{}).WriteTable(&empty)
	header, _, _ := strings.Cut(empty.String(), "\n")
	lines := strings.Split(sample, "\n")
	require.Equal(t, strings.Fields(header), strings.Fields(lines[0]), "the sample's header is the table's")

	want := []string{"steady"}
	for _, e := range DefaultConfig().Schedule {
		want = append(want, string(e.Kind))
	}
	want = append(want, "total")
	var got []string
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) == 0 {
			break
		}
		got = append(got, f[0])
		if f[0] == "total" {
			break
		}
	}
	assert.Equal(t, want, got, "the sample's phases, by their first word")
}
