package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"time"
)

// config sizes one run. The defaults are what make bench runs; the test runs a tiny one.
type config struct {
	Duration time.Duration // one timed load
	Rounds   int           // interleaved rounds where two sides are compared

	OverheadCallers  []int
	OverheadRounds   int           // interleaved rounds of overhead, typed then raw or raw then typed
	OverheadDuration time.Duration // one side's run in a round
	AllocCalls       int           // sequential calls the Background-context allocations are counted over
	ProtocolCallers  int
	WireOps          int
	ScaleCallers     []int
	ScaleNodes       []int
	NodesCallers     int
	ConnCount        int

	ChurnWorkers  int
	ChurnDuration time.Duration
	ChurnSchedule string
	// RefreshKillCallers and RefreshKillRounds size the churn section's kill after a
	// refresh.
	RefreshKillCallers int
	RefreshKillRounds  int

	StormCallers  int
	StormHealthy  int
	StormDuration time.Duration

	PipelineCallers  []int
	PipelineDuration time.Duration // one mode at one number of callers
	HOLValue         int           // bytes of the slow writes of the head-of-line measurement
	CodecCalls       int           // Gets encoded and decoded in memory for the floor budget

	DedupCallers int // callers of the dedup section
	DedupCalls   int // Increments of one side in one round of the dedup section
	// ClientAllocCallers and ClientCPUCallers size the client section; ClientBenchArgs
	// are the go test flags it runs BenchmarkStackOverhead with.
	ClientAllocCallers []int
	ClientCPUCallers   []int
	ClientBenchArgs    []string

	// Sections names the sections to run; empty runs them all.
	Sections []string
}

// defaultConfig is the full run: about two minutes.
func defaultConfig() config {
	return config{
		Duration: 500 * time.Millisecond, Rounds: 5,
		OverheadCallers: []int{1, 16}, OverheadRounds: 12, OverheadDuration: 200 * time.Millisecond, AllocCalls: 2000,
		ProtocolCallers: 16, WireOps: 1000,
		ScaleCallers: []int{1, 4, 16, 64, 256}, ScaleNodes: []int{1, 3, 5}, NodesCallers: 64, ConnCount: 64,
		ChurnWorkers: 256, ChurnDuration: 28 * time.Second,
		ChurnSchedule:      "migrate@3s,join@6s,kill@10s,failback@14s,leave@18s,stall@21s,lost-host@27s",
		RefreshKillCallers: 16, RefreshKillRounds: 3,
		StormCallers: 256, StormHealthy: 16, StormDuration: 3 * time.Second,
		PipelineCallers: []int{1, 4, 16, 64, 256}, PipelineDuration: 250 * time.Millisecond, HOLValue: 512 << 10,
		CodecCalls:         200_000,
		ClientAllocCallers: []int{1, 64}, ClientCPUCallers: []int{64, 256}, ClientBenchArgs: benchArgsFor(false),
		DedupCallers: 16, DedupCalls: 20_000,
	}
}

// results is everything one run measured; it is written as bench.json.
type results struct {
	Machine   machine          `json:"machine"`
	Overhead  []overheadResult `json:"overhead"`
	Protocols []protocolResult `json:"protocols"`
	Scale     scaleResult      `json:"scale"`
	Churn     churnResult      `json:"churn"`
	Storm     stormResult      `json:"storm"`
	Batch     batchResult      `json:"batch"`
	Pipeline  pipelineResult   `json:"pipeline"`
	Codec     []codecRow       `json:"codec"`
	Dedup     dedupResult      `json:"dedup"`
	Client    clientResult     `json:"client"`
	// Sections are the sections that ran, in order.
	Sections []string `json:"sections"`
	Targets  []target `json:"targets"`
	Seconds  float64  `json:"seconds"`
}

// machine describes where the run happened.
type machine struct {
	Date       string `json:"date"`
	GoVersion  string `json:"goVersion"`
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	CPUModel   string `json:"cpuModel"`
	LoadBefore string `json:"loadAverageBefore"`
	LoadAfter  string `json:"loadAverageAfter"`
}

func main() {
	if os.Getenv(nodeEnv) != "" {
		os.Exit(serveNode()) // the client section's node process
	}
	out := flag.String("out", "bench-out", "directory for bench.json")
	quick := flag.Bool("quick", false, "a tiny run that only checks the bench works")
	only := flag.String("sections", "", "comma-separated sections to run (overhead, protocols, scale, churn, storm, batch, pipeline, codec, client, dedup); default all")
	flag.Parse()
	cfg := defaultConfig()
	if *quick {
		cfg = quickConfig()
	}
	if *only != "" {
		cfg.Sections = strings.Split(*only, ",")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := run(ctx, cfg, os.Stderr)
	if res != nil {
		writeTable(os.Stdout, res)
		if werr := writeJSON(*out, res); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "zarisbench:", err)
		os.Exit(1)
	}
}

// quickConfig is a tiny run of every section.
func quickConfig() config {
	return config{
		Duration: 100 * time.Millisecond, Rounds: 1,
		OverheadCallers: []int{1, 4}, OverheadRounds: 2, OverheadDuration: 50 * time.Millisecond, AllocCalls: 100,
		ProtocolCallers: 2, WireOps: 20,
		ScaleCallers: []int{1, 4}, ScaleNodes: []int{1, 2}, NodesCallers: 4, ConnCount: 4,
		ChurnWorkers: 8, ChurnDuration: 2 * time.Second,
		ChurnSchedule:      "migrate@400ms,kill@800ms,failback@1200ms",
		RefreshKillCallers: 4, RefreshKillRounds: 1,
		StormCallers: 8, StormHealthy: 2, StormDuration: 300 * time.Millisecond,
		PipelineCallers: []int{1, 4}, PipelineDuration: 50 * time.Millisecond, HOLValue: 64 << 10,
		CodecCalls:         1000,
		ClientAllocCallers: []int{1, 4}, ClientCPUCallers: []int{4}, ClientBenchArgs: benchArgsFor(true),
		DedupCallers: 4, DedupCalls: 200,
	}
}

// run measures every section in turn, logging progress to log. It returns what it
// measured so far with the first error.
func run(ctx context.Context, cfg config, log io.Writer) (*results, error) {
	began := time.Now()
	res := &results{Machine: describeMachine()}
	runStep := func(name string, f func() error) error {
		t := time.Now()
		fmt.Fprintf(log, "zarisbench: %s...\n", name)
		if err := f(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(log, "zarisbench: %s done in %.1fs\n", name, time.Since(t).Seconds())
		return nil
	}
	var err error
	type step struct {
		name string
		f    func() error
	}
	steps := []step{
		{"overhead", func() error {
			res.Overhead, err = overhead(ctx, cfg.OverheadCallers, cfg.OverheadRounds, cfg.OverheadDuration, cfg.AllocCalls)
			return err
		}},
		{"protocols", func() error {
			res.Protocols, err = protocols(ctx, cfg.ProtocolCallers, cfg.Rounds, cfg.Duration, cfg.WireOps)
			return err
		}},
		{"scale", func() error {
			res.Scale, err = scale(ctx, cfg.ScaleCallers, cfg.ScaleNodes, 3, cfg.NodesCallers, 2*cfg.Duration, cfg.ConnCount)
			return err
		}},
		{"churn", func() error {
			if res.Churn, err = churn(ctx, cfg.ChurnWorkers, cfg.ChurnDuration, cfg.ChurnSchedule); err != nil {
				return err
			}
			res.Churn.KillAfterRefresh, err = killAfterRefresh(ctx, cfg.RefreshKillCallers, cfg.RefreshKillRounds)
			return err
		}},
		{"storm", func() error {
			res.Storm, err = storm(ctx, cfg.StormCallers, cfg.StormHealthy, cfg.StormDuration)
			return err
		}},
		{"batch", func() error {
			res.Batch, err = batch(ctx, cfg.Rounds, cfg.Duration)
			return err
		}},
		{"pipeline", func() error {
			res.Pipeline, err = pipeline(ctx, cfg.PipelineCallers, cfg.Rounds, cfg.PipelineDuration, cfg.HOLValue, cfg.CodecCalls)
			return err
		}},
		{"codec", func() error {
			res.Codec, err = codecRows()
			return err
		}},
		{"client", func() error {
			res.Client, err = clientCost(ctx, cfg.ClientAllocCallers, cfg.ClientCPUCallers, cfg.Rounds, cfg.PipelineDuration, cfg.CodecCalls, cfg.ClientBenchArgs)
			return err
		}},
		{"dedup", func() error {
			res.Dedup, err = dedup(ctx, cfg.DedupCallers, cfg.DedupCalls, cfg.Rounds)
			return err
		}},
	}
	for _, name := range cfg.Sections {
		if !slices.ContainsFunc(steps, func(s step) bool { return s.name == name }) {
			return nil, fmt.Errorf("unknown section %q (overhead, protocols, scale, churn, storm, batch, pipeline, codec, client, dedup)", name)
		}
	}
	for _, s := range steps {
		if len(cfg.Sections) > 0 && !slices.Contains(cfg.Sections, s.name) {
			continue
		}
		res.Sections = append(res.Sections, s.name)
		if err := runStep(s.name, s.f); err != nil {
			res.Seconds = time.Since(began).Seconds()
			return res, err
		}
	}
	res.Targets = targets(res)
	res.Machine.LoadAfter = loadAverage()
	res.Seconds = time.Since(began).Seconds()
	return res, nil
}

func describeMachine() machine {
	m := machine{
		Date: time.Now().UTC().Format(time.RFC3339), GoVersion: goruntime.Version(),
		CPUs: goruntime.NumCPU(), GOMAXPROCS: goruntime.GOMAXPROCS(0), LoadBefore: loadAverage(),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// loadAverage is the first three fields of /proc/loadavg, empty where there is none.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func writeJSON(dir string, res *results) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "bench.json"), append(b, '\n'), 0o644)
}
