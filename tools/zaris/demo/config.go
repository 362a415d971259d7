package demo

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/clustron/zaris-go/runtime"
)

// Kind is a kind of ownership churn the demo drives.
type Kind string

// The churn kinds, by the names the schedule uses.
const (
	// Migrate moves one segment to another node.
	Migrate Kind = "migrate"
	// Join starts a new node; segments migrate to it (scale-out).
	Join Kind = "join"
	// Kill stops a node abruptly; the coordinator fails its segments over to replicas.
	Kill Kind = "kill"
	// Failback restarts the last killed node (or the last lost host's replacement, which
	// runs) and hands its preferred segments back to it.
	Failback Kind = "failback"
	// Leave drains a node and takes it out of the cluster.
	Leave Kind = "leave"
	// Stall stands a node still for StallFor, as SIGSTOP would: past its lease, the
	// coordinator fails its segments over, and it comes back as a replica. It comes back
	// on its own, a fixed time after it stopped, and then takes up the requests that waited
	// in its connections.
	Stall Kind = "stall"
	// LostHost loses a node's host for good: like a stall it stops answering without
	// refusing anything (no reset, its connections stay open and its requests wait in them
	// unread), but it stays lost until the store has given every segment it owned to
	// another node and LostHostHold more, and it never answers the requests it held: it is
	// then replaced by a fresh process on its old ports (empty: it catches up as a
	// replica), which a later failback hands its segments back.
	LostHost Kind = "lost-host"
)

// StallFor is how long a stall event stands its node still: longer than the in-process
// store takes to fail it over (its 2 s lease must lapse in etcd: about 3.5 s), so the
// client has to find the new owners while the node stands still.
const StallFor = 5 * time.Second

// LostHostHold is how long a lost host stays lost after the store has failed it over:
// the client must have found every new owner without any answer from the lost node.
const LostHostHold = time.Second

// lostHostMax bounds how long a lost host stands still if the demo cannot replace it (the
// event's context ended first); replacing it ends the stall at once.
const lostHostMax = 2 * settleTimeout

var kinds = []Kind{Migrate, Join, Kill, Failback, Leave, Stall, LostHost}

// Event is one scheduled churn event.
type Event struct {
	// Kind is what happens.
	Kind Kind
	// At is when it starts, from the start of the workload.
	At time.Duration
	// Node is the node it targets; 0 lets the demo choose (see Run).
	Node int32
}

// String writes the event as the schedule does: kind[:node]@at.
func (e Event) String() string {
	s := string(e.Kind)
	if e.Node != 0 {
		s += ":" + strconv.Itoa(int(e.Node))
	}
	return s + "@" + e.At.String()
}

// DefaultSchedule is every churn kind once over about 48 seconds, and a failback that hands
// the lost host's replacement its segments back.
const DefaultSchedule = "migrate@5s,join@10s,kill@15s,failback@21s,leave@27s,stall@32s,lost-host@39s,failback@46s"

// ParseSchedule reads a schedule such as "kill@8s,failback@16s,join:4@24s": comma-separated
// events, each a kind (migrate, join, kill, failback, leave, stall, lost-host), an optional
// ":node" and "@" a Go duration from the start. Events come back sorted by time.
func ParseSchedule(s string) ([]Event, error) {
	var events []Event
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		what, at, ok := strings.Cut(item, "@")
		if !ok {
			return nil, fmt.Errorf("schedule event %q: want kind@duration, for example kill@8s", item)
		}
		d, err := time.ParseDuration(at)
		if err != nil || d < 0 {
			return nil, fmt.Errorf("schedule event %q: %q is not a duration like 8s", item, at)
		}
		kind, node, hasNode := strings.Cut(what, ":")
		e := Event{Kind: Kind(kind), At: d}
		if !slices.Contains(kinds, e.Kind) {
			return nil, fmt.Errorf("schedule event %q: unknown kind %q (want migrate, join, kill, failback, leave, stall or lost-host)", item, kind)
		}
		if hasNode {
			n, err := strconv.ParseInt(node, 10, 32)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("schedule event %q: node %q is not a positive node id", item, node)
			}
			e.Node = int32(n)
		}
		events = append(events, e)
	}
	slices.SortStableFunc(events, func(a, b Event) int { return int(a.At - b.At) })
	return events, nil
}

// Config is one demo run.
type Config struct {
	// Nodes is the number of store nodes to start. Default 3.
	Nodes int
	// Workers is the number of concurrent application goroutines. Default 16.
	Workers int
	// KeysPerWorker is how many keys each worker owns and writes. Default 64.
	KeysPerWorker int
	// Duration is how long the workload runs. Default 48 s. Every scheduled event runs, and
	// the workload goes on past Duration until the last one completed half a second ago,
	// so an event that runs late (a loaded machine) still gets a phase of its own.
	Duration time.Duration
	// Schedule is the churn, in time order. Events at or after Duration do not run.
	Schedule []Event
	// Protocol is the Thrift protocol of the client. Default binary.
	Protocol runtime.Protocol
	// Out is the directory for report.json and timeline.html; empty writes neither.
	Out string
	// Progress receives live progress; nil prints none.
	Progress io.Writer
	// Live rewrites one progress line in place (for a terminal) instead of printing a line
	// every ProgressEvery.
	Live bool
	// ProgressEvery is the interval of plain progress lines. Default 5 s.
	ProgressEvery time.Duration
	// ClientOptions are extra client options, applied after the demo's own.
	ClientOptions []runtime.Option
}

// DefaultConfig returns the configuration `make demo` runs.
func DefaultConfig() Config {
	events, err := ParseSchedule(DefaultSchedule)
	if err != nil {
		panic(err) // DefaultSchedule is a constant that parses.
	}
	return Config{
		Nodes:         3,
		Workers:       16,
		KeysPerWorker: 64,
		Duration:      48 * time.Second,
		Schedule:      events,
		Protocol:      runtime.ProtocolBinary,
		ProgressEvery: 5 * time.Second,
	}
}

// validate fills defaults for zero fields and rejects values that make no sense.
func (c *Config) validate() error {
	d := DefaultConfig()
	if c.Nodes == 0 {
		c.Nodes = d.Nodes
	}
	if c.Workers == 0 {
		c.Workers = d.Workers
	}
	if c.KeysPerWorker == 0 {
		c.KeysPerWorker = d.KeysPerWorker
	}
	if c.Duration == 0 {
		c.Duration = d.Duration
	}
	if c.Protocol == "" {
		c.Protocol = d.Protocol
	}
	if c.ProgressEvery == 0 {
		c.ProgressEvery = d.ProgressEvery
	}
	switch {
	case c.Nodes < 2:
		return fmt.Errorf("demo: nodes must be at least 2 (replication needs a second copy), got %d", c.Nodes)
	case c.Workers < 1:
		return fmt.Errorf("demo: workers must be at least 1, got %d", c.Workers)
	case c.KeysPerWorker < 1:
		return fmt.Errorf("demo: keys per worker must be at least 1, got %d", c.KeysPerWorker)
	case c.Duration < 0:
		return fmt.Errorf("demo: duration must be positive, got %s", c.Duration)
	case c.ProgressEvery < 0:
		return fmt.Errorf("demo: progress interval must be positive, got %s", c.ProgressEvery)
	}
	return nil
}
