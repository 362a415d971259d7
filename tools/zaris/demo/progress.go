package demo

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// progress prints how the run is going: one line rewritten in place on a terminal, or a plain
// line every interval otherwise.
type progress struct {
	w        io.Writer
	live     bool
	every    time.Duration
	total    time.Duration
	start    time.Time
	ops      *atomic.Int64
	errs     *atomic.Int64
	phase    atomic.Pointer[string]
	lastOps  int64
	lastTime time.Time
}

// loop prints until done is closed.
func (p *progress) loop(done <-chan struct{}) {
	interval := p.every
	if p.live {
		interval = 250 * time.Millisecond
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	p.lastTime = p.start
	for {
		select {
		case <-done:
			if p.live {
				fmt.Fprintln(p.w)
			}
			return
		case now := <-t.C:
			p.print(now)
		}
	}
}

func (p *progress) print(now time.Time) {
	ops := p.ops.Load()
	rate := float64(ops-p.lastOps) / now.Sub(p.lastTime).Seconds()
	p.lastOps, p.lastTime = ops, now
	phase := "steady"
	if s := p.phase.Load(); s != nil {
		phase = *s
	}
	line := fmt.Sprintf("%5.1fs/%.0fs  %7.0f ops/s  %8d ops  %d errors  phase: %s",
		now.Sub(p.start).Seconds(), p.total.Seconds(), rate, ops, p.errs.Load(), phase)
	if p.live {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	} else {
		fmt.Fprintln(p.w, line)
	}
}
