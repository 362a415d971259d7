package demo

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
	"maps"
	"slices"
	"strings"
)

//go:embed timeline.html.tmpl
var timelineSource string

var timelineTemplate = template.Must(template.New("timeline").Parse(timelineSource))

// The chart's geometry, in SVG user units.
const (
	chartWidth  = 960
	marginLeft  = 70
	marginRight = 20
	panelHeight = 180
	panelGap    = 50
	marginTop   = 40
)

// panel is one metric's plot: a series of points over the workload's seconds. Its Color is
// the stroke the page's stylesheet gives the series.
type panel struct {
	Metric, Title, Unit string
	Color               string
	Top, Bottom         int
	Max                 string
	Points              string
}

// band is one cause's share of the stacked retries panel: a filled polygon between the
// causes below it and its own top. Class names the cause in the page's stylesheet, which
// fills the polygon and its legend swatch with Color.
type band struct {
	Cause, Class     string
	Color            string
	Points           string
	LegendX, LegendY int
}

// Legend entries of the retries panel: legendPerRow to a row, legendWidth apart.
const (
	legendPerRow = 5
	legendWidth  = 175
	legendRow    = 16
)

// causeColors colours the causes a reader most needs to tell apart; others take the
// fallback colours in turn.
var causeColors = map[string]string{
	"Moved": "#1f77b4", "Migrating": "#ff7f0e", "OwnershipChanging": "#2ca02c",
	"ReplicaWriteRejected": "#9467bd", "Unavailable": "#d62728", "transport": "#8c564b",
	"attempt timeout": "#e377c2", "node unavailable": "#7f7f7f",
}

var fallbackColors = []string{"#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5"}

// marker is one churn event drawn across both panels.
type marker struct {
	Kind, Label string
	X           float64
	LabelY      int
}

// tick is one x-axis label.
type tick struct {
	X     float64
	Label string
}

// writeTimeline writes a self-contained page (inline SVG, no scripts, no network) that plots
// ops/s, p99 latency and retried attempts by cause per second, with each churn event marked
// and labelled. The page's stylesheet alone paints the charts: the series and the retries
// bands and their legend take their colours from it, not from attributes it would override.
func writeTimeline(w io.Writer, r *Report) error {
	seconds := len(r.Timeline)
	plotW := float64(chartWidth - marginLeft - marginRight)
	x := func(t float64) float64 {
		if seconds <= 1 {
			return marginLeft
		}
		return marginLeft + t/float64(seconds-1)*plotW
	}
	mk := func(metric, title, unit, color string, top int, value func(Second) float64) panel {
		maxV := 0.0
		for _, s := range r.Timeline {
			maxV = max(maxV, value(s))
		}
		if maxV == 0 {
			maxV = 1
		}
		var pts strings.Builder
		for i, s := range r.Timeline {
			y := float64(top+panelHeight) - value(s)/maxV*panelHeight
			fmt.Fprintf(&pts, "%.1f,%.1f ", x(float64(i)), y)
		}
		return panel{Metric: metric, Title: title, Unit: unit, Color: color, Top: top, Bottom: top + panelHeight,
			Max: fmt.Sprintf("%.0f", maxV), Points: strings.TrimSpace(pts.String())}
	}
	panels := []panel{
		mk("ops", "operations per second", "ops/s", "#1f77b4", marginTop, func(s Second) float64 { return float64(s.Ops) }),
		mk("p99", "p99 latency per second", "ms", "#d62728", marginTop+panelHeight+panelGap, func(s Second) float64 { return s.P99Ms }),
	}
	retriesTop := marginTop + 2*(panelHeight+panelGap)
	chartBottom := retriesTop + panelHeight
	axisY := chartBottom + 18
	bands, retriesMax := retryBands(r.Timeline, x, retriesTop, axisY+12)
	var markers []marker
	for i, e := range r.Events {
		markers = append(markers, marker{Kind: string(e.Kind), Label: e.Label, X: x(e.AtSec), LabelY: marginTop - 16 + (i%2)*12})
	}
	var ticks []tick
	for t := 0; t < seconds; t += 5 {
		ticks = append(ticks, tick{X: x(float64(t)), Label: fmt.Sprintf("%ds", t)})
	}
	height := axisY + 12 + (len(bands)+legendPerRow-1)/legendPerRow*legendRow + 8
	return timelineTemplate.Execute(w, map[string]any{
		"Report": r, "Panels": panels, "Markers": markers, "Ticks": ticks, "Bands": bands,
		"RetriesTop": retriesTop, "RetriesBottom": chartBottom, "RetriesMax": retriesMax,
		"Width": chartWidth, "Height": height, "Left": marginLeft, "Right": chartWidth - marginRight,
		"AxisY": axisY, "ChartBottom": chartBottom,
	})
}

// retryBands stacks the retried attempts per second by cause (in name order) into one
// band per cause, in a panel whose top is at top, with the legend from legendTop down; it
// returns the bands and the highest per-second total.
func retryBands(seconds []Second, x func(float64) float64, top, legendTop int) ([]band, int) {
	causes := map[string]bool{}
	highest := 0
	for _, s := range seconds {
		sum := 0
		for c, n := range s.Retries {
			causes[c] = true
			sum += n
		}
		highest = max(highest, sum)
	}
	scale := float64(max(highest, 1))
	y := func(v int) float64 { return float64(top+panelHeight) - float64(v)/scale*panelHeight }
	below := make([]int, len(seconds))
	var bands []band
	fallback := 0
	for i, c := range slices.Sorted(maps.Keys(causes)) {
		color, ok := causeColors[c]
		if !ok {
			color = fallbackColors[fallback%len(fallbackColors)]
			fallback++
		}
		var upper, lower []string
		for t, s := range seconds {
			upper = append(upper, fmt.Sprintf("%.1f,%.1f", x(float64(t)), y(below[t]+s.Retries[c])))
			lower = append(lower, fmt.Sprintf("%.1f,%.1f", x(float64(t)), y(below[t])))
			below[t] += s.Retries[c]
		}
		slices.Reverse(lower)
		bands = append(bands, band{Cause: c, Class: causeClass(c, i), Color: color, Points: strings.Join(append(upper, lower...), " "),
			LegendX: marginLeft + i%legendPerRow*legendWidth, LegendY: legendTop + i/legendPerRow*legendRow})
	}
	return bands, highest
}

// causeClass names a cause as a CSS class: "cause-" and its letters and digits in lower
// case, the others as "-", then the band's index i, so two causes never share a class.
func causeClass(cause string, i int) string {
	var b strings.Builder
	b.WriteString("cause-")
	for _, r := range strings.ToLower(cause) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	fmt.Fprintf(&b, "-%d", i)
	return b.String()
}
