package demo

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what the application saw during a demo run. It is written as report.json.
type Report struct {
	// Nodes, Workers, Protocol and Duration repeat the run's configuration.
	Nodes    int    `json:"nodes"`
	Workers  int    `json:"workers"`
	Protocol string `json:"protocol"`
	Duration string `json:"duration"`
	// Events are the churn events as they ran.
	Events []EventReport `json:"events"`
	// Phases are the steady phase and one phase per event, in time order.
	Phases []PhaseReport `json:"phases"`
	// Total sums every phase.
	Total PhaseReport `json:"total"`
	// ErrorSamples are some of the errors the application saw, in full: each names the bound
	// that tripped and every attempt's node, outcome and map epoch.
	ErrorSamples []string `json:"errorSamples"`
	// Timeline has one entry per second of the workload.
	Timeline []Second `json:"timeline"`
	// Verification is the read-back of every key after the workload.
	Verification Verification `json:"verification"`
}

// EventReport is one churn event as it ran.
type EventReport struct {
	Kind  Kind   `json:"kind"`
	Label string `json:"label"`
	// AtSec is when it started, in seconds from the start of the workload.
	AtSec float64 `json:"atSec"`
	// TookMs is how long the store took to complete it.
	TookMs float64 `json:"tookMs"`
	// Error is set when the event could not be carried out.
	Error string `json:"error,omitempty"`
}

// PhaseReport sums the calls that started in one phase.
type PhaseReport struct {
	Name     string  `json:"name"`
	StartSec float64 `json:"startSec"`
	EndSec   float64 `json:"endSec"`
	Ops      int     `json:"ops"`
	OpsPerS  float64 `json:"opsPerSec"`
	P50Ms    float64 `json:"p50Ms"`
	P99Ms    float64 `json:"p99Ms"`
	MaxMs    float64 `json:"maxMs"`
	// Errors counts the calls that returned an error to the application, by why: the bound
	// that tripped and the last attempt's outcome.
	Errors      map[string]int `json:"errors"`
	ErrorCount  int            `json:"errorCount"`
	AttemptsAvg float64        `json:"attemptsPerCall"`
	AttemptsMax int            `json:"attemptsMax"`
	// RefreshesRequested sums the map refreshes the calls asked for; RefreshesPerformed
	// counts the map fetches the client made in the phase.
	RefreshesRequested int `json:"refreshesRequested"`
	RefreshesPerformed int `json:"refreshesPerformed"`
}

// Second is one second of the timeline.
type Second struct {
	T      int     `json:"t"`
	Ops    int     `json:"ops"`
	Errors int     `json:"errors"`
	P99Ms  float64 `json:"p99Ms"`
}

// Verification is the read-back of every key after the workload.
type Verification struct {
	Keys int `json:"keys"`
	// Lost lists keys whose acknowledged write was not read back.
	Lost []string `json:"lost"`
	// Misreported lists answers during the run that contradicted what the application
	// knew (a NotFound for an acknowledged key, a Conflict with no concurrent writer).
	Misreported []string `json:"misreported"`
	// Error is set when the read-back itself failed.
	Error string `json:"error,omitempty"`
}

// OK reports whether no acknowledged write was lost and no answer misreported.
func (r *Report) OK() bool {
	v := r.Verification
	return v.Error == "" && len(v.Lost) == 0 && len(v.Misreported) == 0
}

// phaseBound is where a phase starts, with the refresher's fetch count at that moment.
type phaseBound struct {
	name      string
	start     time.Duration
	performed uint64
}

// summarize builds the phases, the total and the timeline from every call's record.
func summarize(records []record, bounds []phaseBound, end time.Duration, endPerformed uint64) ([]PhaseReport, PhaseReport, []Second) {
	slices.SortFunc(records, func(a, b record) int { return int(a.start - b.start) })
	var phases []PhaseReport
	for i, b := range bounds {
		stop, stopPerformed := end, endPerformed
		if i+1 < len(bounds) {
			stop, stopPerformed = bounds[i+1].start, bounds[i+1].performed
		}
		// An event that began after the workload ended (a late wake-up on a loaded machine)
		// has an empty phase.
		stop = max(stop, b.start)
		lo, _ := slices.BinarySearchFunc(records, b.start, func(r record, t time.Duration) int { return int(r.start - t) })
		hi, _ := slices.BinarySearchFunc(records, stop, func(r record, t time.Duration) int { return int(r.start - t) })
		p := phase(b.name, records[lo:hi], b.start, stop)
		p.RefreshesPerformed = int(stopPerformed - b.performed)
		phases = append(phases, p)
	}
	total := phase("total", records, 0, end)
	if len(bounds) > 0 {
		total.RefreshesPerformed = int(endPerformed - bounds[0].performed)
	}

	// Whole seconds only: a partial last second would plot as a fall in throughput.
	seconds := make([]Second, max(int(end/time.Second), 1))
	lat := make([][]time.Duration, len(seconds))
	for _, r := range records {
		s := int(r.start / time.Second)
		if s >= len(seconds) {
			continue
		}
		seconds[s].Ops++
		if r.class != "" {
			seconds[s].Errors++
		}
		lat[s] = append(lat[s], r.latency)
	}
	for i := range seconds {
		seconds[i].T = i
		seconds[i].P99Ms = ms(percentile(lat[i], 0.99))
	}
	return phases, total, seconds
}

// phase sums the records of calls that started in [start, stop).
func phase(name string, rs []record, start, stop time.Duration) PhaseReport {
	p := PhaseReport{Name: name, StartSec: start.Seconds(), EndSec: stop.Seconds(), Ops: len(rs), Errors: map[string]int{}}
	lat := make([]time.Duration, 0, len(rs))
	attempts := 0
	for _, r := range rs {
		lat = append(lat, r.latency)
		attempts += r.attempts
		p.AttemptsMax = max(p.AttemptsMax, r.attempts)
		p.RefreshesRequested += r.refReq
		if r.class != "" {
			p.Errors[r.class]++
			p.ErrorCount++
		}
	}
	if d := (stop - start).Seconds(); d > 0 {
		p.OpsPerS = float64(len(rs)) / d
	}
	if len(rs) > 0 {
		p.AttemptsAvg = float64(attempts) / float64(len(rs))
	}
	slices.Sort(lat)
	p.P50Ms = ms(percentileSorted(lat, 0.50))
	p.P99Ms = ms(percentileSorted(lat, 0.99))
	if len(lat) > 0 {
		p.MaxMs = ms(lat[len(lat)-1])
	}
	return p
}

func percentile(d []time.Duration, q float64) time.Duration {
	slices.Sort(d)
	return percentileSorted(d, q)
}

// percentileSorted returns the q-quantile of sorted durations (nearest rank), 0 for none.
func percentileSorted(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(q*float64(len(d))+0.5) - 1
	return d[min(max(i, 0), len(d)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// WriteTable prints the report as the demo's closing table: one row per phase, then the
// errors by class, the events and the verdict.
func (r *Report) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tops\tops/s\tp50 ms\tp99 ms\tmax ms\terrors\tattempts avg/max\trefreshes req/done\t")
	for _, p := range append(slices.Clone(r.Phases), r.Total) {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.2f\t%.2f\t%.1f\t%d\t%.4f/%d\t%d/%d\t\n",
			p.Name, p.Ops, p.OpsPerS, p.P50Ms, p.P99Ms, p.MaxMs, p.ErrorCount, p.AttemptsAvg, p.AttemptsMax, p.RefreshesRequested, p.RefreshesPerformed)
	}
	tw.Flush()

	fmt.Fprintln(w)
	if r.Total.ErrorCount == 0 {
		fmt.Fprintln(w, "errors seen by the application: none")
	} else {
		fmt.Fprintln(w, "errors seen by the application, by phase and why:")
		for _, p := range r.Phases {
			for _, class := range slices.Sorted(maps.Keys(p.Errors)) {
				fmt.Fprintf(w, "  %-22s %6d  %s\n", p.Name, p.Errors[class], class)
			}
		}
		fmt.Fprintln(w, "for example:")
		for _, e := range r.ErrorSamples {
			fmt.Fprintln(w, "  "+e)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "churn events:")
	for _, e := range r.Events {
		status := fmt.Sprintf("done in %.0f ms", e.TookMs)
		if e.Error != "" {
			status = "FAILED: " + e.Error
		}
		fmt.Fprintf(w, "  %6.1fs  %-22s %s\n", e.AtSec, e.Label, status)
	}
	fmt.Fprintln(w)
	v := r.Verification
	switch {
	case v.Error != "":
		fmt.Fprintf(w, "FAIL: the read-back could not finish: %s\n", v.Error)
	case len(v.Lost) > 0 || len(v.Misreported) > 0:
		fmt.Fprintf(w, "FAIL: %d acknowledged writes lost and %d answers misreported (of %d keys)\n", len(v.Lost), len(v.Misreported), v.Keys)
		for _, l := range append(slices.Clone(v.Lost), v.Misreported...) {
			fmt.Fprintln(w, "  "+l)
		}
	default:
		fmt.Fprintf(w, "OK: all %d keys read back their last acknowledged write; no answer was misreported\n", v.Keys)
	}
}

// writeFiles writes report.json and timeline.html into dir.
func (r *Report) writeFiles(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	var html strings.Builder
	if err := writeTimeline(&html, r); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "timeline.html"), []byte(html.String()), 0o644)
}
