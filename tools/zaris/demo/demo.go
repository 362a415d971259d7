package demo

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/tools/store"
)

// settleTimeout bounds one churn event, and the wait for the store to finish its churn
// before the read-back.
const settleTimeout = 30 * time.Second

// eventTail is the least workload a churn event gets after it completes: when events run
// late (a loaded machine), the workload goes on past Duration until the last one had it.
const eventTail = 500 * time.Millisecond

// maxErrorSamples is how many full error messages the report keeps.
const maxErrorSamples = 10

// Run starts an in-process cluster, runs the workload while it drives the schedule's churn,
// reads every key back, and returns what the application saw. The report is also written to
// cfg.Out when it is set. Run returns an error only when the run itself could not be carried
// out (the cluster did not start, a file could not be written); lost writes and misreported
// answers are in the report (see Report.OK).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	protocol := store.ProtocolHeader
	if cfg.Protocol == runtime.ProtocolJSON {
		protocol = store.ProtocolJSON
	}
	cluster, err := store.NewCluster(ctx, store.ClusterConfig{Nodes: cfg.Nodes, Node: store.NodeConfig{Protocol: protocol}})
	if err != nil {
		return nil, fmt.Errorf("demo: starting the cluster: %w", err)
	}
	defer cluster.Close()

	opts := append([]runtime.Option{runtime.WithSeeds(cluster.Seeds()...), runtime.WithProtocol(cfg.Protocol)}, cfg.ClientOptions...)
	kv, err := zarisclient.Dial(ctx, append(opts, runtime.WithCallMiddleware(captureCallInfo))...)
	if err != nil {
		return nil, fmt.Errorf("demo: connecting the client: %w", err)
	}
	defer kv.Close()
	refresher := kv.Engine().Refresher()

	var ops, errs atomic.Int64
	start := time.Now()
	rec := newRecorder(start, cfg.Workers)
	rec.startPhase("steady", fetchesOf(refresher.Stats()))
	workers := make([]*worker, cfg.Workers)
	for i := range workers {
		workers[i] = newWorker(i, cfg.KeysPerWorker, kv, start, &ops, &errs, rec)
	}
	prog := &progress{w: cfg.Progress, live: cfg.Live, every: cfg.ProgressEvery, total: cfg.Duration, start: start, ops: &ops, errs: &errs}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Go(func() { w.run(runCtx) })
	}
	progressDone := make(chan struct{})
	var progressWG sync.WaitGroup
	if cfg.Progress != nil {
		progressWG.Go(func() { prog.loop(progressDone) })
	}

	ch := &churner{cluster: cluster, initial: cluster.Nodes()}
	var events []EventReport
	for _, e := range cfg.Schedule {
		if e.At >= cfg.Duration {
			continue
		}
		if !sleepUntil(ctx, start.Add(e.At)) {
			break
		}
		st := ch.plan(e)
		prog.phase.Store(&st.label)
		at := rec.startPhase(st.label, fetchesOf(refresher.Stats()))
		// The event gets its own time, not what is left of the workload's: an event still
		// running when the workload ends completes before the read-back.
		ectx, cancel := context.WithTimeout(ctx, settleTimeout)
		err := ch.do(ectx, st)
		cancel()
		er := EventReport{Kind: e.Kind, Label: st.label, AtSec: at.Seconds(), TookMs: ms(time.Since(start) - at)}
		if e.Kind == Stall || e.Kind == LostHost {
			er.NewOwnerMs, er.FailoverMs, er.LostMs = ms(ch.loss.newOwner), ms(ch.loss.failover), ms(ch.loss.lostFor)
		}
		if err != nil {
			er.Error = err.Error()
		}
		events = append(events, er)
	}
	endAt := start.Add(cfg.Duration)
	if len(events) > 0 {
		endAt = later(endAt, time.Now().Add(eventTail))
	}
	sleepUntil(ctx, endAt)
	stop()
	wg.Wait()
	end := time.Since(start)
	endFetched := fetchesOf(refresher.Stats())
	close(progressDone)
	progressWG.Wait()

	var misreported, samples []string
	for _, w := range workers {
		misreported = append(misreported, w.misses...)
		samples = append(samples, w.failed...)
	}
	slices.Sort(samples)
	samples = samples[:min(len(samples), maxErrorSamples)]
	phases, total, timeline := rec.summarize(end, endFetched)
	report := &Report{
		Nodes: cfg.Nodes, Workers: cfg.Workers, Protocol: string(cfg.Protocol), Duration: cfg.Duration.String(),
		Events: events, Phases: phases, Total: total, Timeline: timeline, ErrorSamples: samples,
		Verification: Verification{Lost: []string{}, Misreported: append([]string{}, misreported...)},
	}
	report.Verification = verifyAll(ctx, cluster, workers, report.Verification)
	report.PeakRSSBytes, report.PeakRSSSource = peakRSS()
	if cfg.Out != "" {
		if err := report.writeFiles(cfg.Out); err != nil {
			return report, fmt.Errorf("demo: writing the report: %w", err)
		}
	}
	return report, nil
}

// verifyAll waits for the store to settle, then reads every key and counter back.
func verifyAll(ctx context.Context, cluster *store.Cluster, workers []*worker, v Verification) Verification {
	sctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	if err := cluster.WaitSettled(sctx); err != nil {
		v.Error = "the store did not settle: " + err.Error()
		return v
	}
	for _, w := range workers {
		checked, lost, err := w.verify(ctx)
		v.Keys += checked
		v.Lost = append(v.Lost, lost...)
		if err != nil {
			v.Error = err.Error()
			return v
		}
		counted, wrong, err := w.verifyCounters(ctx)
		v.Counters += counted
		v.Lost = append(v.Lost, wrong...)
		if err != nil {
			v.Error = err.Error()
			return v
		}
	}
	return v
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// sleepUntil waits until t and reports whether ctx was still live then.
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return ctx.Err() == nil // both may be ready: an ended ctx wins
	case <-ctx.Done():
		return false
	}
}
