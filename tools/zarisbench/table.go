package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// target is one budget from the issue and whether this run kept it.
type target struct {
	Name  string `json:"name"`
	Want  string `json:"want"`
	Got   string `json:"got"`
	Holds bool   `json:"holds"`
}

// targets checks every budget against res.
func targets(res *results) []target {
	var ts []target
	add := func(name, want, got string, holds bool) {
		ts = append(ts, target{Name: name, Want: want, Got: got, Holds: holds})
	}
	for _, o := range res.Overhead {
		add(fmt.Sprintf("stack throughput ratio, %d callers", o.Callers), ">= 0.95",
			fmt.Sprintf("%.3f (Background ctx %.3f)", o.Ratio, o.RatioBackground), o.Ratio >= 0.95)
		add(fmt.Sprintf("allocs added per call, %d callers", o.Callers), "<= 3", fmt.Sprintf("%.1f", o.AddedAllocs), o.AddedAllocs < 3.05)
	}
	if rows := res.Scale.Callers; len(rows) > 0 {
		peak := 0.0
		for _, r := range rows {
			peak = max(peak, r.OpsPerS)
		}
		last := rows[len(rows)-1]
		add(fmt.Sprintf("throughput at %d callers over the peak", last.Callers), ">= 0.8 (flattens, not falls)",
			fmt.Sprintf("%.2f", ratio(last.OpsPerS, peak)), last.OpsPerS >= 0.8*peak)
	}
	for _, e := range res.Churn.Events {
		kind, _, _ := strings.Cut(e.Name, " ")
		if kind == "kill" || kind == "stall" || kind == "lost-host" { // their throughput drops until the failover, by design
			continue
		}
		add("throughput during "+e.Name+" over just before", ">= 0.8", fmt.Sprintf("%.2f", e.DuringRatio), e.DuringRatio >= 0.8)
	}
	if k := res.Churn.Kill; k != nil {
		got := fmt.Sprintf("%.0f ms (first %.0f ms)", k.AllMs, k.FirstMs)
		if k.Segments == 0 {
			// The node served no segment in the second before the kill: nothing was measured.
			got = "not measured: the killed node answered for no segment just before"
		}
		add("kill to first answer on every dead segment", fmt.Sprintf("<= %.0f ms", k.TargetMs),
			got, k.Segments > 0 && k.AllMs <= k.TargetMs)
	}
	if k := res.Churn.Stall; k != nil {
		got := fmt.Sprintf("%.0f ms (first %.0f ms)", k.AllMs, k.FirstMs)
		if k.Segments == 0 {
			got = "not measured: the stalled node answered for no segment just before"
		}
		add("stall to first answer on every stalled segment", fmt.Sprintf("<= %.0f ms", k.TargetMs),
			got, k.Segments > 0 && k.FailoverMs > 0 && k.AllMs <= k.TargetMs)
	}
	if k := res.Churn.LostHost; k != nil {
		got := fmt.Sprintf("%.0f ms (first %.0f ms; new owners in the map after %.0f ms, + 600)", k.AllMs, k.FirstMs, k.NewOwnerMs)
		switch {
		case k.Segments == 0:
			got = "not measured: the lost host answered for no segment just before"
		case k.NewOwnerMs == 0:
			got = "not measured: no map gave the lost host's segments new owners while it was lost"
		}
		add("lost host to first answer on every segment", fmt.Sprintf("<= %.0f ms", k.TargetMs),
			got, k.Segments > 0 && k.NewOwnerMs > 0 && k.AllMs <= k.TargetMs)
	}
	if k := res.Churn.KillAfterRefresh; k != nil {
		add("kill after a refresh: application errors", "0",
			fmt.Sprintf("%d of %d calls (%d other errors)", k.CallErrors, k.Calls, k.OtherErrors),
			k.Calls > 0 && k.CallErrors == 0 && k.OtherErrors == 0)
	}
	if c := res.Churn; c.Workers > 0 {
		add(fmt.Sprintf("map fetches per epoch change, %d callers", c.Workers), "<= 1",
			fmt.Sprintf("%d fetches / %d epoch changes", c.RefreshesPerformed, c.EpochChanges), int64(c.RefreshesPerformed) <= c.EpochChanges)
		add("no acknowledged write lost under churn", "0 lost", verdict(c.Verified, c.Problem), c.Verified)
	}
	if s := res.Storm; s.Callers > 0 {
		add(fmt.Sprintf("storm: every call ends within the backoff steps (+1 step), %d callers", s.Callers),
			fmt.Sprintf("max <= %.0f ms", s.BoundMs+100), fmt.Sprintf("p99 %.0f ms, max %.0f ms", s.P99Ms, s.MaxMs), s.MaxMs <= s.BoundMs+100)
		add("storm: map fetches per debounce window", "<= 1",
			fmt.Sprintf("%d fetches in %.1f windows", s.Performed, s.Windows), float64(s.Performed) <= s.Windows+1)
		add("storm: healthy throughput during over before and after", ">= 0.8", fmt.Sprintf("%.2f", s.HealthyRatio), s.HealthyRatio >= 0.8)
	}
	if b := res.Batch; b.Keys > 0 {
		add(fmt.Sprintf("MultiGet of %d keys over %d nodes, keys/s over %d sequential Gets", b.Keys, b.Nodes, b.Keys), ">= 10",
			fmt.Sprintf("%.1f", b.OverSequential), b.OverSequential >= 10)
		add(fmt.Sprintf("MultiGet keys/s over %d concurrent Gets", b.Keys), ">= 2", fmt.Sprintf("%.1f", b.OverConcurrent), b.OverConcurrent >= 2)
		for _, e := range b.Events {
			add("batch items retried outside the moved segments, "+e.Name, "0",
				fmt.Sprintf("%d (of %d retried)", e.Stray, e.ItemsRetried), e.Stray == 0)
		}
	}
	ts = append(ts, pipelineTargets(res)...)
	ts = append(ts, codecTargets(res.Codec)...)
	ts = append(ts, clientTargets(&res.Client)...)
	return ts
}

func verdict(ok bool, problem string) string {
	if ok {
		return "0 lost"
	}
	return problem
}

// writeTable prints res as the tables make bench shows.
func writeTable(w io.Writer, res *results) {
	m := res.Machine
	fmt.Fprintf(w, "zarisbench %s: %s, %d CPUs (GOMAXPROCS %d) %s, load average %s before, %s after, %.0f s\n\n",
		m.Date, m.GoVersion, m.CPUs, m.GOMAXPROCS, m.CPUModel, m.LoadBefore, m.LoadAfter, res.Seconds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	section := func(title, header string) {
		tw.Flush()
		fmt.Fprintf(w, "%s\n", title)
		fmt.Fprintln(tw, header)
	}

	ran := func(name string) bool { return slices.Contains(res.Sections, name) }
	if ran("overhead") {
		section("1. stack overhead: typed client + default stack, pooled, vs raw generated client (Get, binary/framed, 1 node; ops/s best of rounds, ratio median of interleaved rounds; cancellable ctx)",
			"callers\ttyped ops/s\traw ops/s\tratio (median)\trounds' ratios p25-p75\tratio, Background ctx\ttyped allocs\traw allocs\tadded allocs\tadded B\tadded allocs, Background ctx\t")
		for _, o := range res.Overhead {
			fmt.Fprintf(tw, "%d\t%.0f\t%.0f\t%.3f\t%.2f-%.2f\t%.3f\t%.1f\t%.1f\t%+.1f\t%+.0f\t%+.1f\t\n", o.Callers, o.TypedOpsPerS, o.RawOpsPerS, o.Ratio,
				quantileOf(o.RoundRatios, 0.25), quantileOf(o.RoundRatios, 0.75), o.RatioBackground,
				o.TypedAllocs, o.RawAllocs, o.AddedAllocs, o.AddedBytes, o.AddedAllocsBackground)
		}
	}
	if ran("protocols") {
		section("\n2. protocols: 50/50 Get/Put of a 100-byte value, 1 node; bytes on the wire per call",
			"protocol\ttransport\tcallers\tops/s\tof best\tp99 ms\tPut B up/down\tGet B up/down\t")
		for _, p := range res.Protocols {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.0f\t%.2f\t%.2f\t%.0f/%.0f\t%.0f/%.0f\t\n", p.Protocol, p.Transport, p.Callers, p.OpsPerS, p.Ratio, p.P99Ms,
				p.PutUp, p.PutDown, p.GetUp, p.GetDown)
		}
	}
	if ran("scale") {
		section(fmt.Sprintf("\n3. scale: 50/50 Get/Put, %d pipelined connections and a pool of %d per node; heap per pooled connection %.0f B (over %d)",
			res.Scale.PipelineConns, res.Scale.PoolSize, res.Scale.ConnBytes, res.Scale.ConnCount),
			"nodes\tcallers\tops/s\tratio\tp50 ms\tp99 ms\terrors\t")
		for _, r := range append(append([]scaleRow(nil), res.Scale.Callers...), res.Scale.Nodes...) {
			fmt.Fprintf(tw, "%d\t%d\t%.0f\t%.2f\t%.2f\t%.2f\t%d\t\n", r.Nodes, r.Callers, r.OpsPerS, r.Ratio, r.P50Ms, r.P99Ms, r.Errors)
		}
	}
	if ran("churn") {
		c := res.Churn
		section(fmt.Sprintf("\n4. churn: demo engine, %d nodes, %d workers, schedule %s", c.Nodes, c.Workers, c.Schedule),
			"phase\tat s\ttook ms\terrors\tzero window ms\tp99 ms\tp99 ratio\tbefore ops/s\tduring ops/s\tduring/before\tduring/steady\trefreshes asked/fetches/background\towner waits calls/max ms\t")
		for _, p := range append([]churnPhase{c.Steady}, c.Events...) {
			fmt.Fprintf(tw, "%s\t%.1f\t%.0f\t%d\t%.0f\t%.1f\t%.1f\t%.0f\t%.0f\t%.2f\t%.2f\t%d/%d/%d\t%d/%.0f\t\n", p.Name, p.AtSec, p.TookMs, p.Errors, p.ZeroWindowMs,
				p.P99Ms, p.P99Ratio, p.BeforeOpsPerS, p.DuringOpsPerS, p.DuringRatio, p.SteadyRatio, p.RefreshesRequested, p.RefreshesPerformed, p.RefreshesBackground,
				p.OwnerWaitCalls, p.OwnerWaitMaxMs)
		}
		tw.Flush()
		if k := c.Kill; k != nil {
			fmt.Fprintf(w, "kill of %s (%d segments): first answer on one of them after %.0f ms, on all after %.0f ms (target %.0f ms)\n",
				k.Node, k.Segments, k.FirstMs, k.AllMs, k.TargetMs)
		}
		if k := c.Stall; k != nil {
			fmt.Fprintf(w, "stall of %s (%d segments): failed over after %.0f ms; first answer on one of them after %.0f ms, on all after %.0f ms (target %.0f ms)\n",
				k.Node, k.Segments, k.FailoverMs, k.FirstMs, k.AllMs, k.TargetMs)
		}
		if k := c.LostHost; k != nil {
			fmt.Fprintf(w, "lost host %s (%d segments): new owners in the map after %.0f ms, failed over after %.0f ms, lost for %.0f ms; first answer on one of them after %.0f ms, on all after %.0f ms (target %.0f ms)\n",
				k.Node, k.Segments, k.NewOwnerMs, k.FailoverMs, k.LostMs, k.FirstMs, k.AllMs, k.TargetMs)
		}
		if k := c.KillAfterRefresh; k != nil {
			fmt.Fprintf(w, "kill after a refresh: n%d, %d callers on %d of its keys, %d rounds; killed %.1f ms after the refresh, failed over after %.0f ms; %d calls, %d errors (%d other), slowest %.0f ms; %d calls waited for a new owner (B7), longest %.0f ms; %d refreshes debounced, %d of them deferred\n",
				k.Node, k.Callers, k.Keys, k.Rounds, k.KillAfterMs, k.FailoverMs, k.Calls, k.CallErrors, k.OtherErrors, k.MaxMs, k.OwnerWaitCalls, k.OwnerWaitMaxMs, k.Debounced, k.Deferred)
			if k.FirstError != "" {
				fmt.Fprintf(w, "kill after a refresh: first error: %s\n", k.FirstError)
			}
		}
		fmt.Fprintf(w, "map: %d refreshes requested, %d performed (%d GetClusterMap calls incl. bootstrap) for %d epoch changes\n",
			c.RefreshesRequested, c.RefreshesPerformed, c.MapFetches, c.EpochChanges)

	}
	if ran("storm") {
		s := res.Storm
		fmt.Fprintf(w, "\n5. refresh storm: %d callers on an ownerless segment + %d healthy callers, %.1f s\n", s.Callers, s.Healthy, s.Seconds)
		fmt.Fprintf(w, "storm calls %d (failed %d, by bound %v): p50 %.0f ms, p99 %.0f ms, max %.0f ms (backoff steps %.0f ms)\n",
			s.Calls, s.Failed, s.Bounds, s.P50Ms, s.P99Ms, s.MaxMs, s.BoundMs)
		if sc := s.Slowest; sc != nil {
			fmt.Fprintf(w, "slowest storm call: %.0f ms, attempts %v ms, %.0f ms outside them (backoff and refresh waits)\n", sc.ElapsedMs, sc.AttemptsMs, sc.OtherMs)
		}
		fmt.Fprintf(w, "refreshes: %d requested, %d performed in %.1f debounce windows\n", s.Requested, s.Performed, s.Windows)
		fmt.Fprintf(w, "healthy: %.0f ops/s before, %.0f during, %.0f after (during over before-and-after %.2f), %d errors, p99 %.1f ms\n",
			s.HealthyBefore, s.HealthyDuring, s.HealthyAfter, s.HealthyRatio, s.HealthyErrors, s.HealthyP99Ms)
	}
	if ran("batch") {
		b := res.Batch
		fmt.Fprintf(w, "\n6. batch: MultiGet of %d keys over %d nodes vs single Gets (keys/s, best of rounds)\n", b.Keys, b.Nodes)
		fmt.Fprintf(w, "MultiGet %.0f keys/s; %d sequential Gets %.0f keys/s (x%.1f); %d concurrent Gets %.0f keys/s (x%.1f)\n",
			b.MultiKeysPerS, b.Keys, b.SequentialKeysPerS, b.OverSequential, b.Keys, b.ConcurrentKeysPerS, b.OverConcurrent)
		section("items retried per churn event (one MultiGet loop)", "event	calls	retrying calls	items retried	max per call	batch items in moved segments	stray	item errors\t")
		for _, e := range b.Events {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", e.Name, e.Calls, e.Retrying, e.ItemsRetried, e.MaxPerCall, e.MovedItems, e.Stray, e.ItemErrors)
		}
		tw.Flush()
		for _, e := range b.Events {
			if e.FirstStray != "" {
				fmt.Fprintf(w, "%s: first item retried outside the moved segments: %s\n", e.Name, e.FirstStray)
			}
			if e.FirstError != "" {
				fmt.Fprintf(w, "%s: first item without an answer: %s\n", e.Name, e.FirstError)
			}
		}
		section(fmt.Sprintf("the same events under rounds of %d concurrent Gets (a cluster of its own)", b.Keys), "event\trounds\tGets without an answer\t")
		for _, e := range b.GetEvents {
			fmt.Fprintf(tw, "%s\t%d\t%d\t\n", e.Name, e.Rounds, e.GetErrors)
		}
		tw.Flush()
		for _, e := range b.GetEvents {
			if e.FirstError != "" {
				fmt.Fprintf(w, "%s: first Get without an answer: %s\n", e.Name, e.FirstError)
			}
		}
	}
	if ran("pipeline") {
		writePipeline(w, tw, section, res.Pipeline)
	}
	if ran("codec") {
		section("\n8. codec: a Get (100-byte value) in memory, the library's generated code over the in-memory binary protocol vs the generated codec (gen/zariscodec); per operation",
			"step\tlibrary ns\tallocs\tB\tcodec ns\tallocs\tB\ttime ratio\t")
		for _, r := range res.Codec {
			fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.2f\t\n", r.Step, r.LibNs, r.LibAllocs, r.LibBytes, r.CodecNs, r.CodecAllocs, r.CodecBytesOps, r.TimeRatio)
		}
	}
	if ran("client") {
		writeClient(w, tw, section, res.Client)
	}
	if ran("dedup") {
		d := res.Dedup
		section(fmt.Sprintf("\n10. dedup: an Increment with its request token (rule B8: the store keeps its outcome) and without, %d nodes, %d callers, %d calls a side in each of %d interleaved rounds (medians; whole process)",
			d.Nodes, d.Callers, d.CallsPerRound, d.Rounds), "Increment\tCPU µs/call\tallocs/call\tB/call\trequest bytes\t")
		fmt.Fprintf(tw, "with a token\t%.1f\t%.1f\t%.0f\t%d\t\n", d.Tokened.CPUMicrosPerCall, d.Tokened.AllocsPerCall, d.Tokened.BytesPerCall, d.TokenedRequestBytes)
		fmt.Fprintf(tw, "without\t%.1f\t%.1f\t%.0f\t%d\t\n", d.Untokened.CPUMicrosPerCall, d.Untokened.AllocsPerCall, d.Untokened.BytesPerCall, d.RequestBytes)
		tw.Flush()
		fmt.Fprintf(w, "an outcome kept costs a node %.0f bytes of heap\n", d.OutcomeBytes)
	}
	tw.Flush()

	fmt.Fprintln(w, "\ntargets:")
	for _, t := range res.Targets {
		mark := "ok  "
		if !t.Holds {
			mark = "MISS"
		}
		fmt.Fprintf(w, "  %s %-62s want %-24s got %s\n", mark, t.Name, t.Want, t.Got)
	}
}

// quantileOf returns the q-quantile of xs (nearest rank), 0 for none.
func quantileOf(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
