package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/clustron/zaris-go/runtime"
	"github.com/clustron/zaris-go/tools/zaris/demo"
)

// setupDemo declares the demo's knobs; the demo runs a workload on an embedded cluster under
// churn and reports what it saw.
func setupDemo(fs *flag.FlagSet) body {
	d := demo.DefaultConfig()
	nodes := fs.Int("nodes", d.Nodes, "store nodes to start")
	workers := fs.Int("workers", d.Workers, "concurrent application goroutines")
	keys := fs.Int("keys", d.KeysPerWorker, "keys each worker owns")
	duration := fs.Duration("duration", d.Duration, "how long the workload runs")
	schedule := fs.String("schedule", demo.DefaultSchedule, "churn events, kind[:node]@time, comma-separated; kinds: migrate, join, kill, failback, leave, stall (5 s), lost-host (until failed over, then replaced)")
	protocol := fs.String("protocol", string(d.Protocol), "client protocol: binary, compact, header or json")
	out := fs.String("out", "demo-out", "directory for report.json and timeline.html")
	return func(ctx context.Context, c *cli, _ []string) int {
		events, err := demo.ParseSchedule(*schedule)
		if err != nil {
			return c.usageError("demo: --schedule: %v", err)
		}
		switch p := runtime.Protocol(*protocol); p {
		case runtime.ProtocolBinary, runtime.ProtocolCompact, runtime.ProtocolHeader, runtime.ProtocolJSON:
		default:
			return c.usageError("demo: --protocol %q: want binary, compact, header or json", *protocol)
		}
		cfg := demo.Config{
			Nodes: *nodes, Workers: *workers, KeysPerWorker: *keys, Duration: *duration,
			Schedule: events, Protocol: runtime.Protocol(*protocol), Out: *out,
			Progress: c.stdout, Live: isTerminal(c.stdout), ProgressEvery: 5 * time.Second,
		}
		fmt.Fprintf(c.stdout, "zaris demo: %d nodes, %d workers, %s, churn %s\n", cfg.Nodes, cfg.Workers, cfg.Duration, *schedule)
		report, err := demo.Run(ctx, cfg)
		if report != nil {
			fmt.Fprintln(c.stdout)
			report.WriteTable(c.stdout)
			if *out != "" && err == nil {
				writeScreenshot(ctx, c, report, *out)
			}
		}
		switch {
		case err != nil:
			fmt.Fprintf(c.stderr, "zaris: demo: %v\n", err)
			return exitError
		case !report.OK():
			return exitError
		}
		return exitOK
	}
}

// writeScreenshot draws the page the demo wrote into out as out/timeline.png, with the
// browser when there is one, and says which files the demo wrote; without a browser it says
// how to get one.
func writeScreenshot(ctx context.Context, c *cli, report *demo.Report, out string) {
	shot, err := demo.WriteScreenshot(ctx, report, out)
	switch {
	case err == nil:
		fmt.Fprintf(c.stdout, "\nwrote %s/report.json, %s/timeline.html and its picture %s\n", out, out, shot)
	case errors.Is(err, demo.ErrNoBrowser):
		fmt.Fprintf(c.stdout, "\nwrote %s/report.json and %s/timeline.html (for a picture of it, timeline.png, install %s: apt-get install chromium)\n", out, out, demo.Browser)
	default:
		fmt.Fprintf(c.stdout, "\nwrote %s/report.json and %s/timeline.html\n", out, out)
		fmt.Fprintf(c.stderr, "zaris: demo: no timeline.png: %v\n", err)
	}
}

// isTerminal reports whether w is a terminal, where progress is one line rewritten in place.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
