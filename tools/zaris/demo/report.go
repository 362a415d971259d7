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
	// PeakRSSBytes is the demo process's peak resident set size (cluster and client alike,
	// as they share the process), taken after the read-back; PeakRSSSource says how it was
	// measured: "VmHWM" (Linux) or "go runtime Sys" (the memory the Go runtime obtained from
	// the system, elsewhere).
	PeakRSSBytes  int64  `json:"peakRssBytes"`
	PeakRSSSource string `json:"peakRssSource"`
}

// EventReport is one churn event as it ran.
type EventReport struct {
	Kind  Kind   `json:"kind"`
	Label string `json:"label"`
	// AtSec is when it started, in seconds from the start of the workload.
	AtSec float64 `json:"atSec"`
	// TookMs is how long the store took to complete it.
	TookMs float64 `json:"tookMs"`
	// NewOwnerMs, for a stall or a lost host, is when the store's first map that gives one
	// of the node's segments to another node appeared, and FailoverMs when the store had
	// failed every segment of the node over, from the event's start; 0 if not by the end
	// of the stall (or of the loss).
	NewOwnerMs float64 `json:"newOwnerMs,omitempty"`
	FailoverMs float64 `json:"failoverMs,omitempty"`
	// LostMs, for a lost host, is how long the host stood still before it was replaced.
	LostMs float64 `json:"lostMs,omitempty"`
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
	// RefreshesRequested sums the map refreshes the phase's calls asked for (calls share
	// fetches, so many ask for one); RefreshesPerformed counts the map fetches that brought
	// a map during the phase, and RefreshesBackground those of them that no call's request
	// started (clustermap.RefreshStats.Background: an answer showed a newer map, a node went
	// silent, a deferred fetch, an owner wait's later fetches). The others, the fetches
	// calls started, are no more than RefreshesRequested (but for one that a call of the
	// phase before asked for just before this one began).
	RefreshesRequested  int `json:"refreshesRequested"`
	RefreshesPerformed  int `json:"refreshesPerformed"`
	RefreshesBackground int `json:"refreshesBackground"`
	// OwnerWaitCalls counts the calls that, once an owner could not be reached at all,
	// waited for a map naming another owner instead of backing off (rule B7), OwnerWaits
	// their waits (a multi-key call waits at most once between rounds) and OwnerWaitMaxMs
	// the longest time one call spent in them.
	OwnerWaitCalls int     `json:"ownerWaitCalls"`
	OwnerWaits     int     `json:"ownerWaits"`
	OwnerWaitMaxMs float64 `json:"ownerWaitMaxMs"`
	// Retries counts the attempts that were retried, by what each saw: the answer's status
	// ("Moved status", "Migrating status", "Unavailable status", ...) or the kind of failure
	// when no answer came (transport, attempt timeout, node unavailable, "B6: owner moved
	// away": a newer map moved the segment away while the attempt waited, ...).
	// A multi-key call's sub-requests are not retries; its item retries are in Batches.
	Retries map[string]int `json:"retries"`
	// Batches sums the multi-key calls among Ops.
	Batches BatchReport `json:"batches"`
}

// Second is one second of the timeline.
type Second struct {
	T      int     `json:"t"`
	Ops    int     `json:"ops"`
	Errors int     `json:"errors"`
	P99Ms  float64 `json:"p99Ms"`
	// Waiting counts the calls that were in flight longer than 100 ms at some time in this
	// second, whenever they started: calls waiting (on a stalled owner, a backoff, a map).
	Waiting int `json:"waiting"`
	// Retries counts the retried attempts of the calls that started in this second, by what
	// each saw (see PhaseReport.Retries).
	Retries map[string]int `json:"retries"`
}

// Verification is the read-back of every key after the workload.
type Verification struct {
	Keys int `json:"keys"`
	// Counters is how many counters were read back, each of which must hold exactly the
	// increments its writer had acknowledged.
	Counters int `json:"counters"`
	// Lost lists keys whose acknowledged write was not read back, and counters that do not
	// hold their acknowledged increments.
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

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// WriteTable prints the report as the demo's closing table: one row per phase, then the
// errors by class, the events and the verdict.
func (r *Report) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tops\tops/s\tp50 ms\tp99 ms\tmax ms\terrors\tattempts avg/max\trefreshes asked\tmap fetches\tin background\towner waits calls/max ms\t")
	for _, p := range append(slices.Clone(r.Phases), r.Total) {
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.2f\t%.2f\t%.1f\t%d\t%.4f/%d\t%d\t%d\t%d\t%d/%.0f\t\n",
			p.Name, p.Ops, p.OpsPerS, p.P50Ms, p.P99Ms, p.MaxMs, p.ErrorCount, p.AttemptsAvg, p.AttemptsMax,
			p.RefreshesRequested, p.RefreshesPerformed, p.RefreshesBackground, p.OwnerWaitCalls, p.OwnerWaitMaxMs)
	}
	tw.Flush()
	fmt.Fprintln(w, refreshesNote)
	r.writeBatches(w)

	fmt.Fprintln(w)
	if len(r.Total.Retries) == 0 {
		fmt.Fprintln(w, "retried attempts: none")
	} else {
		fmt.Fprintln(w, "retried attempts, by phase and what the attempt saw:")
		writeByPhase(w, r.Phases, func(p PhaseReport) map[string]int { return p.Retries })
	}
	fmt.Fprintln(w)
	if r.Total.OwnerWaitCalls == 0 {
		fmt.Fprintln(w, "calls that waited for a new owner (rule B7): none")
	} else {
		fmt.Fprintln(w, "calls that waited for a new owner (rule B7: an owner they could not reach), by phase:")
		for _, p := range append(slices.Clone(r.Phases), r.Total) {
			if p.OwnerWaitCalls > 0 {
				fmt.Fprintf(w, "  %-22s %6d calls, %d waits, longest %.1f ms\n", p.Name, p.OwnerWaitCalls, p.OwnerWaits, p.OwnerWaitMaxMs)
			}
		}
	}
	fmt.Fprintln(w)
	if r.Total.ErrorCount == 0 {
		fmt.Fprintln(w, "errors seen by the application: none")
	} else {
		fmt.Fprintln(w, "errors seen by the application, by phase and why:")
		writeByPhase(w, r.Phases, func(p PhaseReport) map[string]int { return p.Errors })
		fmt.Fprintln(w, "for example:")
		for _, e := range r.ErrorSamples {
			fmt.Fprintln(w, "  "+e)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "churn events:")
	for _, e := range r.Events {
		status := fmt.Sprintf("done in %.0f ms", e.TookMs)
		if e.NewOwnerMs > 0 && e.NewOwnerMs < e.FailoverMs {
			status += fmt.Sprintf(", first new owner after %.0f ms", e.NewOwnerMs)
		}
		if e.FailoverMs > 0 {
			status += fmt.Sprintf(", failed over after %.0f ms", e.FailoverMs)
		}
		if e.LostMs > 0 {
			status += fmt.Sprintf(", lost for %.0f ms, then replaced (restarted empty)", e.LostMs)
		}
		if e.Error != "" {
			status = "FAILED: " + e.Error
		}
		fmt.Fprintf(w, "  %6.1fs  %-22s %s\n", e.AtSec, e.Label, status)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "peak RSS: %.1f MiB (%s)\n", float64(r.PeakRSSBytes)/(1<<20), r.PeakRSSSource)
	v := r.Verification
	switch {
	case v.Error != "":
		fmt.Fprintf(w, "FAIL: the read-back could not finish: %s\n", v.Error)
	case len(v.Lost) > 0 || len(v.Misreported) > 0:
		fmt.Fprintf(w, "FAIL: %d acknowledged writes lost and %d answers misreported (of %d keys and %d counters)\n", len(v.Lost), len(v.Misreported), v.Keys, v.Counters)
		for _, l := range append(slices.Clone(v.Lost), v.Misreported...) {
			fmt.Fprintln(w, "  "+l)
		}
	default:
		fmt.Fprintf(w, "OK: all %d keys read back their last acknowledged write, all %d counters their acknowledged increments; no answer was misreported\n", v.Keys, v.Counters)
	}
}

// refreshesNote says what the table's refresh columns count.
const refreshesNote = "refreshes asked: by the phase's calls, which share one fetch; map fetches: those that brought a map,\n" +
	"in background: the fetches no call asked for (an answer showed a newer map, a node went silent, or a deferred or owner wait's later fetch)"

// writeByPhase prints one line per phase and key of the counts count picks from it.
func writeByPhase(w io.Writer, phases []PhaseReport, count func(PhaseReport) map[string]int) {
	for _, p := range phases {
		counts := count(p)
		for _, k := range slices.Sorted(maps.Keys(counts)) {
			fmt.Fprintf(w, "  %-22s %6d  %s\n", p.Name, counts[k], k)
		}
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
