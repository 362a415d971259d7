package demo

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

//go:embed timeline.html.tmpl
var timelineSource string

var timelineTemplate = template.Must(template.New("timeline").Funcs(template.FuncMap{"retried": retried}).Parse(timelineSource))

// retried sums a phase's retried attempts.
func retried(p PhaseReport) int {
	n := 0
	for _, v := range p.Retries {
		n += v
	}
	return n
}

// The chart's geometry, in SVG user units. The chart is drawn in a viewBox chartWidth wide
// and scaled to the width of the window, so it fills any window; the text scales with it.
const (
	chartWidth  = 1200
	marginLeft  = 64
	marginRight = 16
	// markerTop is where the event markers begin: their labels are in two rows above it.
	markerTop = 44
	// A panel is its caption (captionHeight, above the plot), its plot (plotHeight) and
	// its time axis (axisHeight, below it), panelGap apart.
	captionHeight = 26
	plotHeight    = 150
	axisHeight    = 22
	panelGap      = 12
	panelHeight   = captionHeight + plotHeight + axisHeight + panelGap
)

// yTick is one labelled value of a panel's y axis, with its grid line.
type yTick struct {
	Y     float64
	Label string
}

// xTick is one labelled time of a panel's time axis.
type xTick struct {
	X     float64
	Label string
}

// panel is one chart: its caption above the plot, the plot's box, its axes and ticks, and
// its series (lines and filled areas).
type panel struct {
	Metric, Caption, Unit string
	CaptionY              int
	Top, Bottom           int
	YTicks                []yTick
	XTicks                []xTick
	TickY, TickMark       int // the baseline of the time axis' labels, the end of its tick marks
	Lines                 []series
	Areas                 []series
	Keys                  []key   // a legend: in the caption row, or below the retries plot
	top                   float64 // the value at the top of the y axis
}

// series is one line or filled area of a panel; Class names it in the page's stylesheet,
// which gives it its colour.
type series struct {
	Name, Class, Cause string
	Points             string
}

// key is one legend entry: a swatch in the series' colour and its name.
type key struct {
	Name, Class string
	X, Y        int
}

// causeStyle is one retry cause's class and colour, the same in the chart and the table.
type causeStyle struct {
	Cause, Class, Color string
}

// Legend entries of the retries panel: legendPerRow to a row, legendWidth apart.
const (
	legendPerRow = 5
	legendWidth  = 220
	legendRow    = 18
)

// causeColors colours the causes a reader most needs to tell apart; others take the
// fallback colours in turn.
var causeColors = map[string]string{
	"Moved status": "#1f77b4", "Migrating status": "#ff7f0e", "OwnershipChanging status": "#2ca02c",
	"ReplicaWriteRejected status": "#9467bd", "Unavailable status": "#d62728", "transport": "#8c564b",
	"attempt timeout": "#e377c2", "node unavailable": "#7f7f7f", "B6: owner moved away": "#17becf",
}

var fallbackColors = []string{"#bcbd22", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5", "#c49c94"}

// The colours of the line series and of the waiting calls' area.
const (
	opsColor     = "#1f77b4"
	p99Color     = "#d62728"
	waitingColor = "#e7ba52"
	failedColor  = "#d62728"
)

// marker is one churn event drawn across every panel, labelled once above them.
type marker struct {
	Kind, Label string
	X           float64
	LabelY      int
	End         bool // the label ends at the marker: there is no room for it on the right
}

// writeTimeline writes a self-contained page (inline SVG, no scripts, no network) that plots
// per second of the workload ops/s, p99 latency, the calls waiting (in flight over 100 ms)
// with the calls that failed, and retried attempts by cause, with each churn event marked
// and labelled once, and a table of the phases. Every panel has its caption above the plot,
// a y axis with labelled values and its unit, and a time axis. The page's stylesheet alone
// paints the charts: the series, the bands and their legend take their colours from it, not
// from attributes it would override.
func writeTimeline(w io.Writer, r *Report) error {
	seconds := len(r.Timeline)
	plotW := float64(chartWidth - marginLeft - marginRight)
	x := func(t float64) float64 {
		if seconds <= 1 {
			return marginLeft
		}
		return marginLeft + t/float64(seconds-1)*plotW
	}
	causes := retryCauses(r)
	panels := make([]panel, 0, 4) // add's pointers stay valid
	add := func(metric, caption, unit string, highest float64, integer bool) *panel {
		top := markerTop + len(panels)*panelHeight + captionHeight
		p := panel{Metric: metric, Caption: caption, Unit: unit, CaptionY: top - 8, Top: top, Bottom: top + plotHeight,
			TickY: top + plotHeight + 17, TickMark: top + plotHeight + 4}
		step, n := niceScale(highest, integer)
		p.top = step * float64(n)
		for i := range n + 1 {
			v := float64(i) * step
			p.YTicks = append(p.YTicks, yTick{Y: float64(p.Bottom) - float64(i)/float64(n)*plotHeight, Label: tickLabel(v, step)})
		}
		p.XTicks = timeTicks(seconds, x)
		panels = append(panels, p)
		return &panels[len(panels)-1]
	}
	// y is where value v is drawn in panel p, whose axis ends at its top tick.
	y := func(p *panel, v float64) float64 { return float64(p.Bottom) - v/p.top*plotHeight }
	line := func(p *panel, name, class string, value func(Second) float64) series {
		var pts []string
		for i, s := range r.Timeline {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(float64(i)), y(p, value(s))))
		}
		return series{Name: name, Class: class, Points: strings.Join(pts, " ")}
	}
	highest := func(value func(Second) float64) float64 {
		h := 0.0
		for _, s := range r.Timeline {
			h = max(h, value(s))
		}
		return h
	}
	ops := func(s Second) float64 { return float64(s.Ops) }
	p99 := func(s Second) float64 { return s.P99Ms }
	waiting := func(s Second) float64 { return float64(s.Waiting) }
	failed := func(s Second) float64 { return float64(s.Errors) }
	retried := func(s Second) float64 {
		n := 0
		for _, v := range s.Retries {
			n += v
		}
		return float64(n)
	}

	p := add("ops", "operations per second", "ops/s", highest(ops), true)
	p.Lines = []series{line(p, "operations", "ops", ops)}
	p = add("p99", "p99 latency of the calls that started in each second", "ms", highest(p99), false)
	p.Lines = []series{line(p, "p99 latency", "p99", p99)}
	p = add("waiting", "calls waiting (in flight over 100 ms) and calls failed, per second", "calls",
		max(highest(waiting), highest(failed)), true)
	p.Areas = []series{area(line(p, "calls waiting", "waiting", waiting), x, seconds, float64(p.Bottom))}
	p.Lines = []series{line(p, "calls failed", "failed", failed)}
	p.Keys = captionKeys(p.CaptionY, "calls waiting", "waiting", "calls failed", "failed")
	retriesCaption := "retried attempts per second, stacked by what the attempt saw"
	if len(causes) == 0 {
		retriesCaption += ": none"
	}
	p = add("retries", retriesCaption, "attempts", highest(retried), true)
	p.Areas = retryBands(r.Timeline, causes, x, func(v int) float64 { return y(p, float64(v)) })
	legendTop := p.TickY + 14
	for i, b := range p.Areas {
		p.Keys = append(p.Keys, key{Name: b.Cause, Class: b.Class, X: marginLeft + i%legendPerRow*legendWidth, Y: legendTop + i/legendPerRow*legendRow})
	}

	var markers []marker
	for i, e := range r.Events {
		m := marker{Kind: string(e.Kind), Label: e.Label, X: x(e.AtSec), LabelY: 16 + (i%2)*16}
		m.End = m.X+float64(8*len(e.Label)) > chartWidth
		markers = append(markers, m)
	}
	height := legendTop + (len(p.Areas)+legendPerRow-1)/legendPerRow*legendRow + 8
	var tableCauses []causeStyle
	for _, c := range causes {
		if r.Total.Retries[c.Cause] > 0 || slices.ContainsFunc(r.Phases, func(p PhaseReport) bool { return p.Retries[c.Cause] > 0 }) {
			tableCauses = append(tableCauses, c)
		}
	}
	return timelineTemplate.Execute(w, map[string]any{
		"Report": r, "Panels": panels, "Markers": markers, "Causes": causes, "TableCauses": tableCauses,
		"Phases": append(slices.Clone(r.Phases), r.Total), "Width": chartWidth, "Height": height,
		"Left": marginLeft, "Right": chartWidth - marginRight, "PlotWidth": chartWidth - marginLeft - marginRight, "PlotHeight": plotHeight, "MarkerTop": markerTop,
		"ChartBottom": panels[len(panels)-1].Bottom, "RefreshesNote": refreshesNote,
		"Colors": map[string]string{"ops": opsColor, "p99": p99Color, "waiting": waitingColor, "failed": failedColor},
	})
}

// captionKeys is a legend of name/class pairs, right-aligned in a caption row at y.
func captionKeys(y int, pairs ...string) []key {
	var keys []key
	right := chartWidth - marginRight
	for i := len(pairs) - 2; i >= 0; i -= 2 {
		right -= 14 + 8*len(pairs[i]) + 16
		keys = append([]key{{Name: pairs[i], Class: pairs[i+1], X: right, Y: y - 10}}, keys...)
	}
	return keys
}

// area closes line s down to the axis at bottom, as a filled area.
func area(s series, x func(float64) float64, seconds int, bottom float64) series {
	if seconds == 0 {
		return s
	}
	s.Points = fmt.Sprintf("%.1f,%.1f %s %.1f,%.1f", x(0), bottom, s.Points, x(float64(seconds-1)), bottom)
	return s
}

// niceScale is a y axis for values up to highest: a step of 1, 2 or 5 times a power of ten
// (at least 1 for integer counts) and n steps, two to five, whose top is at or above highest.
func niceScale(highest float64, integer bool) (step float64, n int) {
	if highest <= 0 {
		highest = 1
	}
	raw := highest / 4
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step = 10 * mag
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	if integer && step < 1 {
		step = 1
	}
	n = max(int(math.Ceil(highest/step-1e-9)), 2)
	return step, n
}

// tickLabel writes the tick value v of an axis in steps of step briefly: 20k for 20000 in
// steps of 10000 or more, 0.2 for 0.2, with the decimals the step needs.
func tickLabel(v, step float64) string {
	if v == 0 {
		return "0"
	}
	if step >= 10000 {
		return strconv.FormatFloat(v/1000, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(v, 'f', max(0, int(-math.Floor(math.Log10(step)))), 64)
}

// timeTicks labels the time axis every 5 s, or every 10 s, 30 s or 60 s in longer runs,
// so that it has at most 13 labels.
func timeTicks(seconds int, x func(float64) float64) []xTick {
	step := 5
	for _, s := range []int{10, 30, 60, 300} {
		if seconds/step <= 12 {
			break
		}
		step = s
	}
	var ticks []xTick
	for t := 0; t < seconds; t += step {
		ticks = append(ticks, xTick{X: x(float64(t)), Label: fmt.Sprintf("%ds", t)})
	}
	return ticks
}

// retryCauses gives every retry cause in the report, in name order, its class and colour.
func retryCauses(r *Report) []causeStyle {
	names := map[string]bool{}
	for _, s := range r.Timeline {
		for c := range s.Retries {
			names[c] = true
		}
	}
	for _, p := range append(slices.Clone(r.Phases), r.Total) {
		for c := range p.Retries {
			names[c] = true
		}
	}
	var out []causeStyle
	fallback := 0
	for i, c := range slices.Sorted(maps.Keys(names)) {
		color, ok := causeColors[c]
		if !ok {
			color = fallbackColors[fallback%len(fallbackColors)]
			fallback++
		}
		out = append(out, causeStyle{Cause: c, Class: causeClass(c, i), Color: color})
	}
	return out
}

// retryBands stacks the retried attempts per second by cause (in name order) into one
// band per cause seen in the timeline; y is where a count is drawn.
func retryBands(seconds []Second, causes []causeStyle, x func(float64) float64, y func(int) float64) []series {
	below := make([]int, len(seconds))
	var bands []series
	for _, c := range causes {
		if !slices.ContainsFunc(seconds, func(s Second) bool { _, ok := s.Retries[c.Cause]; return ok }) {
			continue
		}
		var upper, lower []string
		for t, s := range seconds {
			upper = append(upper, fmt.Sprintf("%.1f,%.1f", x(float64(t)), y(below[t]+s.Retries[c.Cause])))
			lower = append(lower, fmt.Sprintf("%.1f,%.1f", x(float64(t)), y(below[t])))
			below[t] += s.Retries[c.Cause]
		}
		slices.Reverse(lower)
		bands = append(bands, series{Name: c.Cause, Cause: c.Cause, Class: c.Class, Points: strings.Join(append(upper, lower...), " ")})
	}
	return bands
}

// causeClass names a cause as a CSS class: "cause-" and its letters and digits in lower
// case, each run of others as one "-" (html/template refuses "--" in a stylesheet), then
// the cause's index i, so two causes never share a class.
func causeClass(cause string, i int) string {
	var b strings.Builder
	b.WriteString("cause-")
	for _, r := range strings.ToLower(cause) {
		switch {
		case r >= 'a' && r <= 'z' || r >= '0' && r <= '9':
			b.WriteRune(r)
		case !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	if !strings.HasSuffix(b.String(), "-") {
		b.WriteByte('-')
	}
	fmt.Fprintf(&b, "%d", i)
	return b.String()
}
