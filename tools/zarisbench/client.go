package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/apache/thrift/lib/go/thrift"

	"github.com/clustron/zaris-go/gen/zaris"
	"github.com/clustron/zaris-go/gen/zarisclient"
	"github.com/clustron/zaris-go/gen/zariscodec"
	"github.com/clustron/zaris-go/internal/thriftbuf"
	"github.com/clustron/zaris-go/runtime"
)

// clientAllocRow is the client's heap allocations per Get at some callers, the fewest of
// the rounds.
type clientAllocRow struct {
	Callers int     `json:"callers"`
	Allocs  float64 `json:"allocsPerCall"`
	Bytes   float64 `json:"bytesPerCall"`
}

// clientCPURow is the client and its node pipelined at some callers against the floor at
// the client's batching, each figure the median of the rounds.
type clientCPURow struct {
	Callers int `json:"callers"`
	// ClientUs and NodeUs are the typed client's and its node's CPU per call.
	ClientUs float64 `json:"clientMicrosPerCall"`
	NodeUs   float64 `json:"nodeMicrosPerCall"`
	// PerRoundTrip is the client's calls per pair of socket syscalls (splitRun); the floor
	// carries that many requests (rounded) per round trip, on as many connections as the
	// client pipelines on.
	PerRoundTrip float64 `json:"callsPerRoundTrip"`
	Depth        int     `json:"floorDepth"`
	// FloorClientUs and FloorNodeUs are the floor's sockets' CPU per request on each side.
	FloorClientUs float64 `json:"floorClientMicros"`
	FloorNodeUs   float64 `json:"floorNodeMicros"`
	// CodecClientUs is the generated codec encoding a Get request and decoding its reply,
	// CodecNodeUs decoding the request and encoding the reply.
	CodecClientUs float64 `json:"codecClientMicros"`
	CodecNodeUs   float64 `json:"codecNodeMicros"`
	// ClientRatio is ClientUs over the client's floor (FloorClientUs + CodecClientUs),
	// TotalRatio client and node over the whole floor; medians of the rounds' ratios.
	ClientRatio float64 `json:"clientOverFloor"`
	NodeRatio   float64 `json:"nodeOverFloor"`
	TotalRatio  float64 `json:"totalOverFloor"`
}

// stackOverheadResult is BenchmarkStackOverhead (package runtime) as go test ran it: the
// typed client's call through the default stack over an in-memory socket against the raw
// generated client's, medians of the counts.
type stackOverheadResult struct {
	Counts           int     `json:"counts"`
	RawNs            float64 `json:"rawNsPerOp"`
	RawAllocs        float64 `json:"rawAllocsPerOp"`
	TypedNs          float64 `json:"typedNsPerOp"` // the slower of the background and cancellable contexts
	TypedAllocs      float64 `json:"typedAllocsPerOp"`
	AddedNs          float64 `json:"addedNsPerOp"`
	AddedAllocs      float64 `json:"addedAllocsPerOp"` // beyond the raw call, the Call included
	AddedBytes       float64 `json:"addedBytesPerOp"`
	Error            string  `json:"error,omitempty"`
	BackgroundNs     float64 `json:"typedBackgroundNsPerOp"`
	CancellableNs    float64 `json:"typedCancellableNsPerOp"`
	BackgroundAllocs float64 `json:"typedBackgroundAllocsPerOp"`
}

// clientResult is the client section.
type clientResult struct {
	Rounds int                 `json:"rounds"`
	Allocs []clientAllocRow    `json:"allocs"`
	CPU    []clientCPURow      `json:"cpu"`
	Stack  stackOverheadResult `json:"stackOverhead"`
}

// clientCost measures the client section: allocations per Get at allocCallers, CPU per
// call pipelined at cpuCallers against the floor, and BenchmarkStackOverhead.
func clientCost(ctx context.Context, allocCallers, cpuCallers []int, rounds int, d time.Duration, codecCalls int, benchArgs []string) (clientResult, error) {
	res := clientResult{Rounds: rounds}
	node, err := startNode(ctx)
	if err != nil {
		return res, err
	}
	defer node.Close()
	cl, err := dialSeeds(ctx, node.hello.Seeds)
	if err != nil {
		return res, err
	}
	defer cl.Close()
	key := []byte("bench")
	if _, err := cl.Put(ctx, &zaris.PutRequest{Key: key, Value: value}); err != nil {
		return res, err
	}
	req := &zaris.GetRequest{Key: key}
	get := func(callers int) func() (loadResult, error) {
		return func() (loadResult, error) {
			return countLoad(ctx, callers, d, func(ctx context.Context) error {
				_, err := cl.Get(ctx, req)
				return err
			}), nil
		}
	}
	for _, callers := range allocCallers {
		if _, err := measureSplit(node, get(callers)); err != nil { // warm-up
			return res, err
		}
		row := clientAllocRow{Callers: callers, Allocs: -1}
		for range rounds {
			r, err := measureSplit(node, get(callers))
			if err != nil {
				return res, fmt.Errorf("%d callers: %w", callers, err)
			}
			if row.Allocs < 0 || r.Allocs < row.Allocs {
				row.Allocs, row.Bytes = r.Allocs, r.Bytes
			}
		}
		res.Allocs = append(res.Allocs, row)
	}
	codecClient, codecNode := genCodecCost(codecCalls)
	conns := runtime.DefaultPipelineConns
	for _, callers := range cpuCallers {
		if _, err := measureSplit(node, get(callers)); err != nil {
			return res, err
		}
		var typed, floors []splitRun
		var depths []int
		var perRoundTrip []float64
		for range rounds {
			t, err := measureSplit(node, get(callers))
			if err != nil {
				return res, fmt.Errorf("%d callers: %w", callers, err)
			}
			depth := max(1, int(t.PerRoundTrip+0.5))
			f, err := measureSplit(node, func() (loadResult, error) {
				return floorLoad(ctx, node.hello.Echo, conns, conns*depth, depth, d)
			})
			if err != nil {
				return res, fmt.Errorf("the floor at %d callers: %w", callers, err)
			}
			typed, floors = append(typed, t), append(floors, f)
			depths, perRoundTrip = append(depths, depth), append(perRoundTrip, t.PerRoundTrip)
		}
		row := clientCPURow{Callers: callers, CodecClientUs: codecClient, CodecNodeUs: codecNode}
		var cr, nr, tr []float64
		for i := range typed {
			t, f := typed[i], floors[i]
			cr = append(cr, ratio(t.ClientUs, f.ClientUs+codecClient))
			nr = append(nr, ratio(t.NodeUs, f.NodeUs+codecNode))
			tr = append(tr, ratio(t.ClientUs+t.NodeUs, f.ClientUs+f.NodeUs+codecClient+codecNode))
		}
		field := func(rs []splitRun, f func(splitRun) float64) float64 {
			var xs []float64
			for _, r := range rs {
				xs = append(xs, f(r))
			}
			return median(xs)
		}
		row.ClientUs = field(typed, func(r splitRun) float64 { return r.ClientUs })
		row.NodeUs = field(typed, func(r splitRun) float64 { return r.NodeUs })
		row.FloorClientUs = field(floors, func(r splitRun) float64 { return r.ClientUs })
		row.FloorNodeUs = field(floors, func(r splitRun) float64 { return r.NodeUs })
		row.PerRoundTrip = median(perRoundTrip)
		slices.Sort(depths)
		row.Depth = depths[len(depths)/2]
		row.ClientRatio, row.NodeRatio, row.TotalRatio = median(cr), median(nr), median(tr)
		res.CPU = append(res.CPU, row)
	}
	res.Stack = stackOverhead(ctx, benchArgs)
	return res, nil
}

// dialSeeds connects a default client (pipelined) to seeds.
func dialSeeds(ctx context.Context, seeds []string) (*zarisclient.Client, error) {
	return zarisclient.Dial(ctx, runtime.WithSeeds(seeds...), runtime.WithEnv(noEnv))
}

// genCodecCost is the generated codec's CPU microseconds per Get on each side, in memory:
// the client encoding the request and decoding the reply, the node decoding the request
// and encoding the reply (a 100-byte value); each decode copies its bytes first, as a
// connection's reader copies a frame. It takes n calls in codecRounds rounds, the cheapest
// round of each side.
func genCodecCost(n int) (client, node float64) {
	cfg := &thrift.TConfiguration{MaxMessageSize: 16 << 20, MaxContainerSize: 1 << 20}
	req := &zaris.GetRequest{Key: []byte("bench")}
	resp := &zaris.GetResponse{Status: zaris.KvStatus_Ok, Value: make([]byte, 100), Version: 7, MapEpoch: 3}
	reqBuf := zariscodec.AppendZarisKvGetArgs(thriftbuf.AppendMessageBegin(nil, "Get", thrift.CALL, 1), &zaris.ZarisKvGetArgs{Req: req})
	replyBuf := zariscodec.AppendZarisKvGetResult(thriftbuf.AppendMessageBegin(nil, "Get", thrift.REPLY, 1), &zaris.ZarisKvGetResult{Success: resp})
	var out, in []byte
	n = max(n/codecRounds, 1)
	per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 / float64(n) }
	for round := range codecRounds {
		c0 := cpuTime()
		for i := range n {
			args := zaris.ZarisKvGetArgs{Req: req}
			out = zariscodec.AppendZarisKvGetArgs(thriftbuf.AppendMessageBegin(out[:0], "Get", thrift.CALL, int32(i)), &args)
			in = append(in[:0], replyBuf[messageHeader(replyBuf):]...)
			var r zaris.ZarisKvGetResult
			zariscodec.DecodeZarisKvGetResult(in, &r, cfg)
		}
		c1 := cpuTime()
		for i := range n {
			in = append(in[:0], reqBuf[messageHeader(reqBuf):]...)
			var a zaris.ZarisKvGetArgs
			zariscodec.DecodeZarisKvGetArgs(in, &a, cfg)
			r := zaris.ZarisKvGetResult{Success: resp}
			out = zariscodec.AppendZarisKvGetResult(thriftbuf.AppendMessageBegin(out[:0], "Get", thrift.REPLY, int32(i)), &r)
		}
		c2 := cpuTime()
		if cu, nu := per(c1-c0), per(c2-c1); round == 0 {
			client, node = cu, nu
		} else {
			client, node = min(client, cu), min(node, nu)
		}
	}
	return client, node
}

// benchLine is one result line of go test -bench -benchmem.
var benchLine = regexp.MustCompile(`^BenchmarkStackOverhead/(\S+?)-\d+\s+\d+\s+([\d.]+) ns/op\s+([\d.]+) B/op\s+([\d.]+) allocs/op`)

// stackOverhead runs BenchmarkStackOverhead with go test in the client module (found with
// go list in the workspace), GOWORK off as the Makefile's root commands run, and takes
// the medians of its counts; Error says why it did not run.
func stackOverhead(ctx context.Context, args []string) stackOverheadResult {
	var res stackOverheadResult
	dir, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/clustron/zaris-go").Output()
	if err != nil {
		res.Error = fmt.Sprintf("finding the client module: %v", err)
		return res
	}
	cmd := exec.CommandContext(ctx, "go", append([]string{"test", "-C", strings.TrimSpace(string(dir)), "-run", "^$",
		"-bench", "^BenchmarkStackOverhead$", "-benchmem"}, append(args, "./runtime/")...)...)
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		res.Error = fmt.Sprintf("go test: %v: %s", err, lastLines(out, 5))
		return res
	}
	type op struct{ ns, bytes, allocs float64 }
	byName := map[string][]op{}
	for _, line := range strings.Split(string(out), "\n") {
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var o op
		o.ns, _ = strconv.ParseFloat(m[2], 64)
		o.bytes, _ = strconv.ParseFloat(m[3], 64)
		o.allocs, _ = strconv.ParseFloat(m[4], 64)
		byName[m[1]] = append(byName[m[1]], o)
	}
	raw, bg, cancellable := byName["raw"], byName["typed,_background_ctx"], byName["typed,_cancellable_ctx"]
	if len(raw) == 0 || len(raw) != len(bg) || len(raw) != len(cancellable) {
		res.Error = fmt.Sprintf("unexpected output: %s", lastLines(out, 5))
		return res
	}
	var added, addedAllocs, addedBytes, rawNs, bgNs, cNs []float64
	for i := range raw {
		typed := bg[i]
		if cancellable[i].ns > typed.ns {
			typed.ns = cancellable[i].ns
		}
		typed.allocs = max(bg[i].allocs, cancellable[i].allocs)
		typed.bytes = max(bg[i].bytes, cancellable[i].bytes)
		added = append(added, typed.ns-raw[i].ns)
		addedAllocs = append(addedAllocs, typed.allocs-raw[i].allocs)
		addedBytes = append(addedBytes, typed.bytes-raw[i].bytes)
		rawNs, bgNs, cNs = append(rawNs, raw[i].ns), append(bgNs, bg[i].ns), append(cNs, cancellable[i].ns)
	}
	res.Counts = len(raw)
	res.RawNs, res.BackgroundNs, res.CancellableNs = median(rawNs), median(bgNs), median(cNs)
	res.TypedNs = max(res.BackgroundNs, res.CancellableNs)
	res.RawAllocs, res.BackgroundAllocs = raw[0].allocs, bg[0].allocs
	res.TypedAllocs = max(bg[0].allocs, cancellable[0].allocs)
	res.AddedNs, res.AddedAllocs, res.AddedBytes = median(added), median(addedAllocs), median(addedBytes)
	return res
}

// lastLines is the last n lines of b, joined by " | ".
func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

// clientTargets are the client section's budgets.
func clientTargets(c *clientResult) []target {
	var ts []target
	for _, r := range c.Allocs {
		ts = append(ts, target{Name: fmt.Sprintf("client allocs and bytes per Get, %s (node in a process of its own)", callersName(r.Callers)),
			Want: "<= 3, <= 200 B", Got: fmt.Sprintf("%.1f, %.0f B", r.Allocs, r.Bytes), Holds: r.Allocs <= 3.05 && r.Bytes <= 200})
	}
	last := 0
	for _, r := range c.CPU {
		ts = append(ts, target{Name: fmt.Sprintf("client CPU per call pipelined over its floor, %d callers", r.Callers), Want: "<= 1.5x",
			Got: fmt.Sprintf("%.2f (%.2f µs vs %.2f+%.2f µs)", r.ClientRatio, r.ClientUs, r.FloorClientUs, r.CodecClientUs), Holds: r.ClientRatio <= 1.5})
		last = max(last, r.Callers)
	}
	for _, r := range c.CPU {
		if r.Callers != last {
			continue
		}
		ts = append(ts, target{Name: fmt.Sprintf("client + node CPU per call over their floor, %d callers", r.Callers), Want: "<= 2x",
			Got:   fmt.Sprintf("%.2f (%.2f µs vs %.2f µs)", r.TotalRatio, r.ClientUs+r.NodeUs, r.FloorClientUs+r.FloorNodeUs+r.CodecClientUs+r.CodecNodeUs),
			Holds: r.TotalRatio <= 2})
	}
	if c.Rounds == 0 {
		return ts
	}
	s := c.Stack
	if s.Error != "" {
		ts = append(ts, target{Name: "BenchmarkStackOverhead: the stack's time per call", Want: "<= 0.6 µs", Got: "not measured: " + s.Error})
		return ts
	}
	ts = append(ts,
		target{Name: "BenchmarkStackOverhead: the stack's time per call", Want: "<= 0.6 µs",
			Got: fmt.Sprintf("%.2f µs (typed %.0f ns, raw %.0f ns)", s.AddedNs/1e3, s.TypedNs, s.RawNs), Holds: s.AddedNs <= 600},
		target{Name: "BenchmarkStackOverhead: allocs in the stack beyond the Call", Want: "0",
			Got: fmt.Sprintf("%.0f (%+.0f B with the Call)", s.AddedAllocs-1, s.AddedBytes), Holds: s.AddedAllocs <= 1})
	return ts
}

// writeClient prints the client section.
func writeClient(w io.Writer, tw *tabwriter.Writer, section func(title, header string), c clientResult) {
	section("\n9. client alone: Get of a 100-byte value, default client (pipelined), its node and the floor's echo server in a process of their own; allocations: fewest of rounds",
		"callers\tclient allocs/call\tclient B/call\t")
	for _, r := range c.Allocs {
		fmt.Fprintf(tw, "%d\t%.1f\t%.0f\t\n", r.Callers, r.Allocs, r.Bytes)
	}
	section("CPU µs per call, medians of rounds; floor: echo sockets at the client's calls per read+write pair, on its connections, plus the generated codec in memory",
		"callers\tclient\tnode\tcalls/(read+write)\tfloor depth\tfloor client sockets+codec\tfloor node sockets+codec\tclient/floor\tnode/floor\tclient+node/floor\t")
	for _, r := range c.CPU {
		fmt.Fprintf(tw, "%d\t%.2f\t%.2f\t%.1f\t%d\t%.2f+%.2f\t%.2f+%.2f\t%.2f\t%.2f\t%.2f\t\n", r.Callers, r.ClientUs, r.NodeUs, r.PerRoundTrip, r.Depth,
			r.FloorClientUs, r.CodecClientUs, r.FloorNodeUs, r.CodecNodeUs, r.ClientRatio, r.NodeRatio, r.TotalRatio)
	}
	tw.Flush()
	if s := c.Stack; s.Error == "" && s.Counts > 0 {
		fmt.Fprintf(w, "BenchmarkStackOverhead (go test, %d counts, medians): raw %.0f ns %.0f allocs, typed background ctx %.0f ns, cancellable ctx %.0f ns, %.0f allocs: the stack adds %.0f ns, %.0f allocs, %.0f B\n",
			s.Counts, s.RawNs, s.RawAllocs, s.BackgroundNs, s.CancellableNs, s.TypedAllocs, s.AddedNs, s.AddedAllocs, s.AddedBytes)
	}
}

// benchArgsFor is the go test flags of stackOverhead for a full or a quick run.
func benchArgsFor(quick bool) []string {
	if quick {
		return []string{"-benchtime", "200x", "-count", "1"}
	}
	return []string{"-benchtime", "300ms", "-count", "5"}
}

// callersName is "1 caller" or "n callers".
func callersName(n int) string {
	if n == 1 {
		return "1 caller"
	}
	return fmt.Sprintf("%d callers", n)
}
