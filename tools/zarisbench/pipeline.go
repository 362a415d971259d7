package main

import (
	"context"
	"fmt"
	"io"
	"net"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/runtime"
)

// The modes of the pipeline section, in the order they run at each number of callers.
const (
	modeFloorRT   = "socket floor, 1 per round trip"
	modeFloorPipe = "socket floor, pipelined"
	modeRawPool   = "raw generated client, pool"
	modeTyped     = "typed client, pool"
	modeTypedPipe = "typed client, pipelined"
)

var pipelineModes = []string{modeFloorRT, modeFloorPipe, modeRawPool, modeTyped, modeTypedPipe}

// rawPoolSize is the connections of the raw generated client's pool and of the 1-per-round-
// trip socket floor, the typed client's default pool size.
const rawPoolSize = runtime.DefaultPoolSize

// echoSize is the bytes of one request (and its echo) on the bare socket: about a Get of a
// short key.
const echoSize = 48

// pipelineRow is one mode at one number of callers.
type pipelineRow struct {
	Mode    string  `json:"mode"`
	Callers int     `json:"callers"`
	OpsPerS float64 `json:"opsPerSec"`
	P50Ms   float64 `json:"p50Ms"`
	P99Ms   float64 `json:"p99Ms"`
	// Allocs is heap allocations per call in the whole process (client and node).
	Allocs float64 `json:"allocsPerOp"`
	// CPUPer100k is the process's CPU seconds (user + system, client and node) per 100,000 calls.
	CPUPer100k float64 `json:"cpuSecondsPer100k"`
	Errors     int     `json:"errors"`
}

// holResult is head-of-line blocking: the p99 of Gets while other callers write large
// values, in each mode.
type holResult struct {
	Getters      int     `json:"getters"`
	Writers      int     `json:"writers"`
	ValueBytes   int     `json:"valueBytes"`
	PooledP50Ms  float64 `json:"pooledGetP50Ms"`
	PooledP99Ms  float64 `json:"pooledGetP99Ms"`
	PipedP50Ms   float64 `json:"pipelinedGetP50Ms"`
	PipedP99Ms   float64 `json:"pipelinedGetP99Ms"`
	PooledGetsPS float64 `json:"pooledGetsPerSec"`
	PipedGetsPS  float64 `json:"pipelinedGetsPerSec"`
}

// pipelineResult is the pipeline section: every mode at every number of callers against
// one node, plus head-of-line blocking.
type pipelineResult struct {
	Conns int           `json:"pipelineConns"`
	Rows  []pipelineRow `json:"rows"`
	HOL   holResult     `json:"headOfLine"`
	// Budget is what half the pipelined socket floor at the most callers leaves per call.
	Budget floorBudget `json:"floorBudget"`
}

// row returns the row of mode at callers, or nil.
func (r *pipelineResult) row(mode string, callers int) *pipelineRow {
	for i := range r.Rows {
		if r.Rows[i].Mode == mode && r.Rows[i].Callers == callers {
			return &r.Rows[i]
		}
	}
	return nil
}

// pipeline measures the pipeline section: Get of a present key on one node, binary over
// framed, in every mode at every number of callers. At each count the modes take turns,
// rounds times, the order rotating from round to round, and each mode's best round is
// kept, so that a burst of load from elsewhere on a shared machine moves one round, not
// the result. Then it measures the codec for the floor budget (floorBudget).
func pipeline(ctx context.Context, callerCounts []int, rounds int, d time.Duration, holValue, codecCalls int) (pipelineResult, error) {
	res, err := pipelineLoads(ctx, callerCounts, rounds, d, holValue)
	if err != nil {
		return res, err
	}
	// The codec runs once the section's store is closed, so that no background work of
	// its nodes or coordinator counts in the process's CPU time.
	codecUs, err := codecCost(ctx, codecCalls)
	if err != nil {
		return res, err
	}
	res.Budget = newFloorBudget(&res, codecUs)
	return res, nil
}

// pipelineLoads runs every mode at every number of callers, and head-of-line blocking.
func pipelineLoads(ctx context.Context, callerCounts []int, rounds int, d time.Duration, holValue int) (pipelineResult, error) {
	res := pipelineResult{Conns: runtime.DefaultPipelineConns}
	cluster, err := startCluster(ctx, 1, 1)
	if err != nil {
		return res, err
	}
	defer cluster.Close()
	pooled, err := dial(ctx, cluster, runtime.WithPipelining(false))
	if err != nil {
		return res, err
	}
	defer pooled.Close()
	piped, err := dial(ctx, cluster, runtime.WithPipelining(true))
	if err != nil {
		return res, err
	}
	defer piped.Close()
	key := []byte("bench")
	if err := preload(ctx, pooled, [][]byte{key}); err != nil {
		return res, err
	}
	req := &zaris.GetRequest{Key: key}

	// The raw generated client: a pool of connections from the engine's own dialer.
	dialer := runtime.DefaultDialer(pooled.Engine().Config())
	rawConns := make(chan runtime.Conn, rawPoolSize)
	for range rawPoolSize {
		c, err := dialer(ctx, cluster.Seeds()[0])
		if err != nil {
			return res, err
		}
		defer c.Close()
		rawConns <- c
	}
	echo, err := startEcho()
	if err != nil {
		return res, err
	}
	defer echo.Close()

	for _, callers := range callerCounts {
		best := map[string]pipelineRow{}
		for round := range rounds {
			for k := range pipelineModes {
				mode := pipelineModes[(round+k)%len(pipelineModes)]
				var row pipelineRow
				var err error
				switch mode {
				case modeFloorRT:
					row, err = measure(func() (loadResult, error) {
						return floorLoad(ctx, echo.Addr().String(), min(callers, rawPoolSize), callers, 1, d)
					})
				case modeFloorPipe:
					row, err = measure(func() (loadResult, error) {
						conns := min(callers, rawPoolSize)
						return floorLoad(ctx, echo.Addr().String(), conns, callers, (callers+conns-1)/conns, d)
					})
				case modeRawPool:
					row, err = measure(func() (loadResult, error) {
						return runLoad(ctx, callers, d, func(ctx context.Context, _, _ int) error {
							c := <-rawConns
							_, err := c.Client().(zaris.ZarisKv).Get(ctx, req)
							rawConns <- c
							return err
						}), nil
					})
				case modeTyped, modeTypedPipe:
					cl := pooled
					if mode == modeTypedPipe {
						cl = piped
					}
					row, err = measure(func() (loadResult, error) {
						return runLoad(ctx, callers, d, func(ctx context.Context, _, _ int) error {
							_, err := cl.Get(ctx, req)
							return err
						}), nil
					})
				}
				if err != nil {
					return res, fmt.Errorf("%s, %d callers: %w", mode, callers, err)
				}
				if b, ok := best[mode]; !ok || row.OpsPerS > b.OpsPerS {
					row.Mode, row.Callers = mode, callers
					best[mode] = row
				}
			}
		}
		for _, mode := range pipelineModes {
			res.Rows = append(res.Rows, best[mode])
		}
	}
	res.HOL, err = headOfLine(ctx, pooled, piped, 16, 2, holValue, 2*d)
	return res, err
}

// measure runs load and adds the process's allocations and CPU time per call.
func measure(load func() (loadResult, error)) (pipelineRow, error) {
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	cpu0 := cpuTime()
	r, err := load()
	cpu := cpuTime() - cpu0
	goruntime.ReadMemStats(&after)
	if err != nil {
		return pipelineRow{}, err
	}
	if r.Errors > 0 {
		return pipelineRow{}, fmt.Errorf("%d errors, the first: %s", r.Errors, r.FirstError)
	}
	n := float64(max(r.Ops, 1))
	return pipelineRow{
		OpsPerS: r.OpsPerS, P50Ms: r.P50Ms, P99Ms: r.P99Ms,
		Allocs:     float64(after.Mallocs-before.Mallocs) / n,
		CPUPer100k: cpu.Seconds() / n * 100_000,
	}, nil
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// headOfLine runs getters Get callers next to writers that Put values of valueBytes, in
// each mode, and reports the Gets' latency: in pipelined mode a Get queued behind a large
// write on a shared connection waits for it.
func headOfLine(ctx context.Context, pooled, piped *zarisclient.Client, getters, writers, valueBytes int, d time.Duration) (holResult, error) {
	res := holResult{Getters: getters, Writers: writers, ValueBytes: valueBytes}
	big := make([]byte, valueBytes)
	for i, cl := range []*zarisclient.Client{pooled, piped} {
		gets := make(chan loadResult, 1)
		ctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		var writeErr error
		var once sync.Once
		for w := range writers {
			wg.Go(func() {
				k := fmt.Appendf(nil, "hol-%d", w)
				for ctx.Err() == nil {
					if _, err := cl.Put(ctx, &zaris.PutRequest{Key: k, Value: big}); err != nil && ctx.Err() == nil {
						once.Do(func() { writeErr = err })
					}
				}
			})
		}
		go func() {
			gets <- runLoad(ctx, getters, d, func(ctx context.Context, _, _ int) error {
				_, err := cl.Get(ctx, &zaris.GetRequest{Key: []byte("bench")})
				return err
			})
		}()
		g := <-gets
		cancel()
		wg.Wait()
		if writeErr != nil {
			return res, fmt.Errorf("head-of-line writes: %w", writeErr)
		}
		if g.Errors > 0 {
			return res, fmt.Errorf("head-of-line gets: %d errors, the first: %s", g.Errors, g.FirstError)
		}
		if i == 0 {
			res.PooledP50Ms, res.PooledP99Ms, res.PooledGetsPS = g.P50Ms, g.P99Ms, g.OpsPerS
		} else {
			res.PipedP50Ms, res.PipedP99Ms, res.PipedGetsPS = g.P50Ms, g.P99Ms, g.OpsPerS
		}
	}
	return res, nil
}

// startEcho starts a Go echo server on loopback: every byte read is written back.
func startEcho() (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return ln, nil
}

// floorLoad is the bare-socket floor: conns connections to the echo server carry callers'
// requests of echoSize bytes, depth at a time per connection: each round trip writes depth
// requests in one write and reads their echoes. Every request of a round trip counts the
// round trip's latency.
func floorLoad(ctx context.Context, addr string, conns, callers, depth int, d time.Duration) (loadResult, error) {
	cs := make([]net.Conn, conns)
	for i := range cs {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return loadResult{}, err
		}
		defer c.Close()
		cs[i] = c
	}
	end := time.Now().Add(d)
	lats := make([][]time.Duration, conns)
	var wg sync.WaitGroup
	var firstErr error
	var once sync.Once
	start := time.Now()
	// With depth 1 each caller has a connection of its own when there are enough, else the
	// callers take turns on them; with a depth, each connection carries its share of callers.
	perConn := max(1, callers/conns)
	if depth > 1 {
		perConn = 1
	}
	var mus = make([]sync.Mutex, conns)
	for w := range conns * perConn {
		ci := w % conns
		wg.Go(func() {
			c := cs[ci]
			out := make([]byte, echoSize*depth)
			in := make([]byte, echoSize*depth)
			var mine []time.Duration
			for time.Now().Before(end) && ctx.Err() == nil {
				t := time.Now()
				mus[ci].Lock()
				_, err := c.Write(out)
				if err == nil {
					_, err = io.ReadFull(c, in)
				}
				mus[ci].Unlock()
				if err != nil {
					once.Do(func() { firstErr = err })
					return
				}
				lat := time.Since(t)
				for range depth {
					mine = append(mine, lat)
				}
			}
			mus[ci].Lock()
			lats[ci] = append(lats[ci], mine...)
			mus[ci].Unlock()
		})
	}
	wg.Wait()
	if firstErr != nil {
		return loadResult{}, firstErr
	}
	elapsed := time.Since(start)
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	slices.Sort(all)
	r := loadResult{Callers: callers, Ops: len(all), OpsPerS: float64(len(all)) / elapsed.Seconds()}
	r.P50Ms, r.P99Ms = ms(quantile(all, 0.5)), ms(quantile(all, 0.99))
	return r, nil
}

// writePipeline prints the pipeline section.
func writePipeline(w io.Writer, tw *tabwriter.Writer, section func(title, header string), p pipelineResult) {
	section(fmt.Sprintf("\n7. pipeline: Get, 1 node, binary/framed; pools of %d connections, pipelined mode %d per node; socket floor: Go echo of %d B on loopback over min(callers, %d) connections, pipelined = callers/connections requests per write; best of rounds", rawPoolSize, p.Conns, echoSize, rawPoolSize),
		"callers\tmode\tops/s\tp50 ms\tp99 ms\tallocs/call\tCPU s/100k calls\t")
	for _, r := range p.Rows {
		fmt.Fprintf(tw, "%d\t%s\t%.0f\t%.3f\t%.3f\t%.1f\t%.2f\t\n", r.Callers, r.Mode, r.OpsPerS, r.P50Ms, r.P99Ms, r.Allocs, r.CPUPer100k)
	}
	tw.Flush()
	h := p.HOL
	fmt.Fprintf(w, "head-of-line: %d Get callers next to %d writers of %d KiB values: Get p50/p99 %.2f/%.2f ms pooled (%.0f Gets/s), %.2f/%.2f ms pipelined (%.0f Gets/s)\n",
		h.Getters, h.Writers, h.ValueBytes>>10, h.PooledP50Ms, h.PooledP99Ms, h.PooledGetsPS, h.PipedP50Ms, h.PipedP99Ms, h.PipedGetsPS)
	if b := p.Budget; b.BudgetUs > 0 {
		fmt.Fprintf(w, "socket floor budget: half the pipelined floor at %d callers (%.0f calls/s) on %d CPUs leaves %.2f µs of CPU per call, client and node; "+
			"the floor's own sockets cost %.2f µs per request and a Get's Thrift encoding and decoding on both sides, in memory, %.2f µs, leaving %.2f µs "+
			"for the client's stack, routing, the node's lookup and waking each caller; the typed client pipelined spent %.2f µs\n",
			b.Callers, b.FloorOpsPerS/2, b.CPUs, b.BudgetUs, b.FloorUs, b.CodecUs, b.BudgetUs-b.FloorUs-b.CodecUs, b.PipelinedUs)
	}
}

// pipelineTargets checks the pipeline section's budgets.
func pipelineTargets(res *results) []target {
	p := &res.Pipeline
	if len(p.Rows) == 0 {
		return nil
	}
	var ts []target
	cmp := func(name, want string, a, b *pipelineRow, value func(*pipelineRow) float64, holds func(float64) bool) {
		if a == nil || b == nil {
			return
		}
		r := ratio(value(a), value(b))
		ts = append(ts, target{Name: name, Want: want, Got: fmt.Sprintf("%.2f", r), Holds: holds(r)})
	}
	ops := func(r *pipelineRow) float64 { return r.OpsPerS }
	cpu := func(r *pipelineRow) float64 { return r.CPUPer100k }
	cmp("pipelined over raw client on a 16-conn pool, 64 callers", ">= 3", p.row(modeTypedPipe, 64), p.row(modeRawPool, 64), ops,
		func(r float64) bool { return r >= 3 })
	cmp("pipelined over the pipelined socket floor, 256 callers", ">= 0.5", p.row(modeTypedPipe, 256), p.row(modeFloorPipe, 256), ops,
		func(r float64) bool { return r >= 0.5 })
	cmp("pipelined over pooled typed client, 1 caller", ">= 0.95", p.row(modeTypedPipe, 1), p.row(modeTyped, 1), ops,
		func(r float64) bool { return r >= 0.95 })
	cmp("CPU per call, pipelined over pooled, 64 callers", "<= 0.5", p.row(modeTypedPipe, 64), p.row(modeTyped, 64), cpu,
		func(r float64) bool { return r <= 0.5 })
	// The rule the default was chosen by: pipelined at least 0.95x the pool at 1 caller
	// (above) and faster from 4 callers up.
	faster := true
	var got []string
	for _, callers := range []int{4, 16, 64, 256} {
		a, b := p.row(modeTypedPipe, callers), p.row(modeTyped, callers)
		if a == nil || b == nil {
			continue
		}
		r := ratio(a.OpsPerS, b.OpsPerS)
		faster = faster && r > 1
		got = append(got, fmt.Sprintf("%d: %.2f", callers, r))
	}
	if len(got) > 0 {
		ts = append(ts, target{Name: "pipelined over pooled typed client, 4 callers and up", Want: "> 1",
			Got: strings.Join(got, ", "), Holds: faster})
	}
	for _, callers := range []int{1, 64} {
		a, b := p.row(modeTypedPipe, callers), p.row(modeTyped, callers)
		if a == nil || b == nil {
			continue
		}
		added := a.Allocs - b.Allocs
		ts = append(ts, target{Name: fmt.Sprintf("allocs per call added by pipelining, %d callers", callers), Want: "<= 2",
			Got: fmt.Sprintf("%+.1f", added), Holds: added <= 2.05})
	}
	return ts
}
