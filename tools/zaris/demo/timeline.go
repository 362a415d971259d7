package demo

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
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

// panel is one metric's plot: a series of points over the workload's seconds.
type panel struct {
	Metric, Title, Unit string
	Color               string
	Top, Bottom         int
	Max                 string
	Points              string
}

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
// ops/s and p99 latency per second, with each churn event marked and labelled.
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
	var markers []marker
	for i, e := range r.Events {
		markers = append(markers, marker{Kind: string(e.Kind), Label: e.Label, X: x(e.AtSec), LabelY: marginTop - 16 + (i%2)*12})
	}
	var ticks []tick
	for t := 0; t < seconds; t += 5 {
		ticks = append(ticks, tick{X: x(float64(t)), Label: fmt.Sprintf("%ds", t)})
	}
	height := marginTop + 2*panelHeight + panelGap + 40
	return timelineTemplate.Execute(w, map[string]any{
		"Report": r, "Panels": panels, "Markers": markers, "Ticks": ticks,
		"Width": chartWidth, "Height": height, "Left": marginLeft, "Right": chartWidth - marginRight,
		"AxisY": height - 25, "ChartBottom": marginTop + 2*panelHeight + panelGap,
	})
}
